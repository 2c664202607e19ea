"""Shared fixtures; the helpers behind them live in tests/support/.

Every directory the host or the dev Core touches lives under the test's tmp_path.
`PEDELEC_TEST_HOST_CMD` (a path or a shell-quoted command) makes every black-box test
run another build of the host, e.g. the PyInstaller bundle (tests/support/host.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkout import permanent_directory
from tests.support.world import HostWorld

# isolation: every test process gets a home of its own (HOME, XDG, the host's folders).
pytest_plugins = ["pytester", "tests.support.markers", "tests.support.isolation"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment for install, uninstall and doctor: every directory they may
    touch (home, XDG config, Pedelec home, config, state, logs) inside tmp_path."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("PEDELEC_", "XDG_", "CHROME_"))
    }
    base.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        PEDELEC_HOME=str(tmp_path / "pedelec-home"),
        PEDELEC_NATIVE_HOST_CONFIG_DIR=str(tmp_path / "config"),
        PEDELEC_NATIVE_HOST_STATE_DIR=str(tmp_path / "state"),
        PEDELEC_NATIVE_HOST_LOG_DIR=str(tmp_path / "logs"),
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )
    return base


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """A failed test that ran hosts shows the end of their log: a host that stopped
    answering says there why (or, if the log just ends, that something killed it)."""
    outcome = yield
    report = outcome.get_result()
    world = getattr(item, "funcargs", {}).get("world")
    if report.failed and isinstance(world, HostWorld) and world.hosts:
        report.sections.append(("host log (last 6000 characters)", world.log_text()[-6000:]))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[HostWorld]:
    w = HostWorld(tmp_path)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def permanent_dir() -> Iterator[Path]:
    """A directory outside every temporary directory (for real installs), removed after."""
    with permanent_directory() as path:
        yield path


@pytest.fixture
def wait_until() -> Callable[..., bool]:
    def wait(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return predicate()

    return wait


@pytest.fixture
def host_log(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """The host's own log, set up in-process under tmp_path; returns a reader of its text."""
    from native_host import logs

    directory = tmp_path / "host-log"
    logs.setup("info", {"PEDELEC_NATIVE_HOST_LOG_DIR": str(directory)})
    try:
        yield lambda: "".join(p.read_text() for p in sorted(directory.glob("*.log*")))
    finally:
        logs.close()
