"""The suite's own home (tests/support/isolation.py, issue 33): every test process runs
with HOME, the XDG folders and the host's folders in temporary space, and a run that
starts with an empty HOME fails if it leaves anything there.

Each case runs a small suite in a pytest subprocess with the plugin, as the real suite
loads it, against a home made for the case.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.checkout import REPO

pytestmark = pytest.mark.process

PLUGIN = ["-p", "tests.support.isolation", "-p", "no:cacheprovider"]

REDIRECTED = f"""
import os, subprocess, sys

STARTED = os.environ["STARTED_HOME"]

def test_every_folder_points_away_from_the_home_the_run_started_with():
    names = ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
             "XDG_RUNTIME_DIR", "PEDELEC_HOME", "PEDELEC_NATIVE_HOST_CONFIG_DIR",
             "PEDELEC_NATIVE_HOST_STATE_DIR", "PEDELEC_NATIVE_HOST_LOG_DIR"]
    for name in names:
        value = os.environ[name]
        assert os.path.isdir(value), name
        assert not value.startswith(STARTED), (name, value)
        assert value.startswith(os.environ["HOME"]), (name, value)

def test_a_host_started_with_the_suites_environment_logs_in_the_suites_home():
    done = subprocess.run(
        [sys.executable, "-m", "native_host", "chrome-extension://ogccgaminlphbkeghldidiiimajfdpag/"],
        input=b"", capture_output=True, timeout=60,
        env={{**os.environ, "PYTHONPATH": {str(REPO)!r}}},
    )
    assert done.returncode == 0, done.stderr
    log = os.path.join(os.environ["PEDELEC_NATIVE_HOST_LOG_DIR"], "pedelec-native-host.log")
    assert " start pid=" in open(log).read()
"""

WRITES_HOME = """
import os

def test_a_bug_that_writes_the_real_home():
    os.makedirs(os.path.join(os.environ["STARTED_HOME"], ".local", "state"))
    open(os.path.join(os.environ["STARTED_HOME"], ".local", "state", "stray.log"), "w").close()
"""

NOTES_HOME = """
import os

def test_notes_its_home():
    with open(os.environ["HOMES_REPORT"], "a") as report:
        report.write(os.environ["HOME"] + "\\n")
    assert os.path.isdir(os.environ["HOME"])
"""


@pytest.fixture
def started_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "started-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("STARTED_HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("PEDELEC_")]:
        monkeypatch.delenv(name)
    return home


@pytest.mark.skipif(os.name == "nt", reason="the layout tested is the POSIX one")
@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_every_test_process_runs_in_a_home_of_its_own(
    pytester: pytest.Pytester, started_home: Path, workers: list[str]
) -> None:
    pytester.makepyfile(test_redirected=REDIRECTED)
    result = pytester.runpytest_subprocess(*PLUGIN, *workers, timeout=120)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"home check: {started_home} is still empty"])
    assert list(started_home.iterdir()) == []


def test_a_run_that_writes_into_the_empty_home_it_started_with_fails_naming_it(
    pytester: pytest.Pytester, started_home: Path
) -> None:
    pytester.makepyfile(test_writes=WRITES_HOME)
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"home check FAILED: the run wrote into {started_home}, which was empty at the start:"]
    )
    assert "  .local/state/stray.log" in result.stdout.lines
    assert result.parseoutcomes()["passed"] == 1  # the test itself passed: the check failed it


def test_a_lived_in_home_is_not_judged_and_the_summary_says_so(
    pytester: pytest.Pytester, started_home: Path
) -> None:
    (started_home / ".bashrc").write_text("# someone lives here\n")
    pytester.makepyfile(test_writes=WRITES_HOME)
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=120)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"home check: not run, {started_home} was not empty at the start"])


def test_the_suites_temporary_homes_are_removed_at_the_end(
    pytester: pytest.Pytester, started_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    report = tmp_path / "homes.txt"
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setenv("HOMES_REPORT", str(report))
    pytester.makepyfile(test_notes_its_home=NOTES_HOME)
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=120)
    assert result.ret == 0, result.stdout.str()
    (home,) = map(Path, report.read_text().split())
    assert home.is_relative_to(temporary)
    assert not home.exists()
    assert list(temporary.iterdir()) == []
