"""The suite's kinds (tests/support/markers.py): a module that declares none fails (an
error in setup), under any `-m`, and a unit test cannot start a process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.markers import FORBID_SKIPS_ENV, OS_NAMES, OS_SKIP_TAG, needs_os

pytestmark = pytest.mark.unit

INNER_CONFTEST = 'pytest_plugins = ["tests.support.markers"]\n'
MARKED = "import pytest\n\npytestmark = pytest.mark.unit\n\n\ndef test_marked():\n    pass\n"
UNMARKED = "def test_forgotten():\n    pass\n"
TWO_KINDS = (
    "import pytest\n\npytestmark = [pytest.mark.unit, pytest.mark.process]\n\n\n"
    "def test_both():\n    pass\n"
)


@pytest.fixture(autouse=True)
def only_our_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs load the markers plugin and nothing else installed in this
    environment (pytest-benchmark, for one, starts `git` at session start, which a unit
    module is not allowed to do)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """A tiny suite with the markers plugin: one marked module, one without a kind."""
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    unit: u\n    process: p\n    e2e: e\n")
    pytester.makepyfile(test_marked=MARKED, test_unmarked=UNMARKED)
    return pytester


@pytest.mark.parametrize("selection", [[], ["-m", "unit"], ["-m", "process"], ["-m", "e2e"]])
def test_a_module_without_its_kind_fails_whatever_is_selected(
    inner: pytest.Pytester, selection: list[str]
) -> None:
    result = inner.runpytest_inprocess("-p", "no:cacheprovider", *selection)
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors") == 1, result.stdout.str()  # failed in setup
    result.stdout.fnmatch_lines(
        ["*test_unmarked must set exactly one of pytest.mark.unit or pytest.mark.process*"]
    )
    assert outcomes.get("passed", 0) == (1 if selection in ([], ["-m", "unit"]) else 0)


def test_a_module_with_two_kinds_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_two=TWO_KINDS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_two must set exactly one of*it sets process, unit*"])


def test_a_unit_test_cannot_start_a_process() -> None:
    """This module is `unit`: starting a program here is refused with the rule's name."""
    with pytest.raises(AssertionError, match="mark its module `process`"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(AssertionError, match="mark its module `process`"):
        os.system("true")


# --- tests that need a real operating system ------------------------------------------
ELSEWHERE = next(name for name in OS_NAMES if name != sys.platform)
OS_BOUND = f"""
import pytest
from tests.support.markers import needs_os

pytestmark = pytest.mark.unit


@needs_os({ELSEWHERE!r}, reason="its registry")
def test_elsewhere():
    pass


@needs_os({sys.platform!r}, "win32", reason="here too")
def test_here():
    pass
"""
MODULE_BOUND = f"""
from tests.support.markers import require_os

require_os({ELSEWHERE!r}, reason="imports what only it has")
import no_such_module_here  # never reached elsewhere

pytestmark = __import__("pytest").mark.unit
"""


def test_an_os_bound_test_skips_elsewhere_saying_what_it_needs(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_os_bound=OS_BOUND, test_module_bound=MODULE_BOUND)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    needed, here = OS_NAMES[ELSEWHERE], OS_NAMES[sys.platform]
    result.stdout.fnmatch_lines(
        [f"*test_os_bound.py*needs {needed} (its registry); this is {here}*"]
    )
    result.stdout.fnmatch_lines([f"*needs {needed} (imports what only it has); this is {here}*"])


MISSING_TOOL = """
import pytest

pytestmark = pytest.mark.unit


def test_needs_a_tool():
    pytest.skip("no chromium executable on PATH")


@pytest.mark.skipif(True, reason="a condition nobody declared")
def test_marked_away():
    pass
"""


def test_where_skips_are_forbidden_only_a_skip_for_another_os_stays_a_skip(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Linux CI jobs forbid skips: a test that would skip for a missing tool, or for
    any undeclared reason, fails instead; a test for another system still skips."""
    monkeypatch.setenv(FORBID_SKIPS_ENV, "1")
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(
        test_missing_tool=MISSING_TOOL, test_os_bound=OS_BOUND, test_module_bound=MODULE_BOUND
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=2, failed=1, errors=1)  # skipif skips in setup
    result.stdout.fnmatch_lines(["*forbids skips: no chromium executable on PATH*"])
    result.stdout.fnmatch_lines(["*forbids skips: a condition nobody declared*"])
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert any(f"{OS_SKIP_TAG} needs " in line and "(its registry)" in line for line in skipped)


def test_an_unknown_os_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown operating system"):
        needs_os("windows", reason="a typo")
