"""The suite's three kinds of test module, so `-m unit` is a fast subset anyone can run.

- `unit`: pure code and in-process servers on loopback; starts no process (enforced: a
  unit test that tries gets a failure naming this rule).
- `process`: starts real processes: the host, a dev Core subprocess, installers, users.
- `e2e`: drives a real headless Chromium.

Every test module declares exactly one of them in `pytestmark`. This module is a pytest
plugin (tests/conftest.py loads it): a module that does not fails every one of its tests,
whichever `-m` expression the run uses, so a forgotten marker is never silently dropped.
"""

from __future__ import annotations

import os
import subprocess
from types import ModuleType
from typing import Any, NoReturn

import pytest

SUITE_MARKERS = ("unit", "process", "e2e")


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
