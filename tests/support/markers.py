"""The suite's three kinds of test module, so `-m unit` is a fast subset anyone can run.

- `unit`: pure code and in-process servers on loopback; starts no process (enforced: a
  unit test that tries gets a failure naming this rule).
- `process`: starts real processes: the host, a dev Core subprocess, installers, users.
- `e2e`: drives a real headless Chromium.

Every test module declares exactly one of them in `pytestmark`. This module is a pytest
plugin (tests/conftest.py loads it): a module that does not fails every one of its tests,
whichever `-m` expression the run uses, so a forgotten marker is never silently dropped.

Tests that need a real operating system say so with `needs_os(...)` (a mark) or, when
the module cannot even be imported elsewhere (`pwd`, `pty`), `require_os(...)` at its top;
elsewhere they skip, with the reason. The CI workflow's Linux jobs set
`PEDELEC_TEST_FORBID_SKIPS=1`, which turns every other skip into a failure there: on
Linux, where the whole suite can run, nothing may skip silently (a missing browser, tool
or root), while a test for another system still skips (.github/workflows/ci.yml).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator
from types import ModuleType
from typing import Any, NoReturn

import pytest

SUITE_MARKERS = ("unit", "process", "e2e")
OS_NAMES = {"linux": "Linux", "darwin": "macOS", "win32": "Windows"}
"""The `sys.platform` values the suite knows, and what they are called in a skip reason."""
POSIX = ("linux", "darwin")
FORBID_SKIPS_ENV = "PEDELEC_TEST_FORBID_SKIPS"
OS_SKIP_TAG = "[other OS]"
"""Starts the reason of a skip for another operating system: the one skip allowed where
skips are forbidden (a Windows test on Linux is not a test that failed to run)."""


def _on(systems: tuple[str, ...], platform: str) -> bool:
    unknown = [name for name in systems if name not in OS_NAMES]
    if unknown:
        raise ValueError(f"unknown operating system {unknown}; known: {', '.join(OS_NAMES)}")
    return platform in systems


def os_skip_reason(systems: tuple[str, ...], reason: str, platform: str = sys.platform) -> str:
    """What a skip says: which systems the test needs, why, and where it is running."""
    needed = " or ".join(OS_NAMES[name] for name in systems)
    here = OS_NAMES.get(platform, platform)
    return f"{OS_SKIP_TAG} needs {needed} ({reason}); this is {here}"


def needs_os(*systems: str, reason: str) -> pytest.MarkDecorator:
    """Mark a test (or a module, in `pytestmark`) that only a real `systems` can run;
    elsewhere it skips, saying what it needs and why."""
    return pytest.mark.skipif(
        not _on(systems, sys.platform), reason=os_skip_reason(systems, reason)
    )


def require_os(*systems: str, reason: str) -> None:
    """At the top of a module whose imports only `systems` have: skip it whole elsewhere."""
    if not _on(systems, sys.platform):
        pytest.skip(os_skip_reason(systems, reason), allow_module_level=True)


def module_markers(module: ModuleType) -> set[str]:
    """The names of the marks a module sets in `pytestmark` (one mark or a list)."""
    marks = getattr(module, "pytestmark", [])
    if not isinstance(marks, list | tuple):
        marks = [marks]
    return {mark.name for mark in marks if isinstance(mark, pytest.Mark | pytest.MarkDecorator)}


def marker_problem(module: ModuleType) -> str | None:
    """Why a test module's kind is not declared properly, or None when it is."""
    kinds = sorted(module_markers(module) & set(SUITE_MARKERS))
    if len(kinds) == 1:
        return None
    wanted = " or ".join(f"pytest.mark.{name}" for name in SUITE_MARKERS)
    found = f"it sets {', '.join(kinds)}" if kinds else "it sets none"
    return f"{module.__name__} must set exactly one of {wanted} in pytestmark; {found}"


def forbid_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way of starting a program fail, for the length of one unit test."""

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise AssertionError(
            "a test marked `unit` started a process: mark its module `process` "
            "(see tests/support/markers.py)"
        )

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Before `-m` deselects anything: a test of a module without its kind gets every kind,
    so any selection keeps it, and `_suite_kind` then fails it."""
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and marker_problem(module) is not None:
            for name in SUITE_MARKERS:
                item.add_marker(name)


@pytest.fixture(autouse=True)
def _suite_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test whose module declares no kind; keep a unit test from starting a process."""
    problem = marker_problem(request.module)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    if "unit" in module_markers(request.module):
        forbid_processes(monkeypatch)


def _skips_forbidden() -> bool:
    return os.environ.get(FORBID_SKIPS_ENV) == "1"


def _forbid(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skip into a failure that says why it was skipped."""
    if not (report.skipped and _skips_forbidden()):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if reason.startswith(OS_SKIP_TAG):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped where {FORBID_SKIPS_ENV}=1 forbids skips: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not hasattr(report, "wasxfail"):
        _forbid(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    _forbid(outcome.get_result())
