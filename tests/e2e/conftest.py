"""Fixtures for the real-Chromium tests: one world per module (dev Core, host registered in
a fresh user data dir, the page/report server), one browser per test.

Without a `chromium` executable the e2e tests skip, except in CI (`CI=true`), where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.e2e import harness
from tests.e2e.world import E2EWorld


@pytest.fixture(scope="session")
def chromium(request: pytest.FixtureRequest) -> str | None:
    """The Chromium executable; its version is written to the test output.

    Missing: skip, or in CI None, so that each test fails (not errors) when it starts a browser.
    """
    executable = harness.find_chromium()
    if executable is None:
        if os.environ.get("CI") == "true":
            return None
        pytest.skip("no chromium executable on PATH (apt-get install -y chromium)")
    version = harness.chromium_version(executable)
    line = f"e2e browser: {version} ({executable})"
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
    else:
        print(line)
    return executable


@pytest.fixture(scope="module")
def e2e(chromium: str | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EWorld]:
    world = E2EWorld(chromium, tmp_path_factory.mktemp("e2e"))
    try:
        world.setup()
        yield world
    finally:
        world.close()


@pytest.fixture
def run_page(e2e: E2EWorld) -> Iterator[Callable[..., E2EWorld]]:
    """Start the browser on a scenario (with extra page parameters); afterwards kill it and
    check no host outlives it."""

    def start(scenario: str, **extra: str) -> E2EWorld:
        e2e.start_browser(scenario, **extra)
        return e2e

    yield start
    leftovers = e2e.stop_browser()
    assert not leftovers, f"host processes outlived the browser: {leftovers}"
