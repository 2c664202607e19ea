"""The suite's kinds (tests/support/markers.py): a module that declares none fails (an
error in setup), under any `-m`, and a unit test cannot start a process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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
