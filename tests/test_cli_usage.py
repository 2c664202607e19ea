"""Every usage error of every command is one line on stderr and exit status 2, never a
traceback, and creates nothing (issue 32): out-of-range, negative, wrong-type and missing
values, walked command by command as a user types them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from native_host.cli import SUBCOMMANDS

pytestmark = pytest.mark.process

ABSENT = "{tmp}/absent"
"""A folder that does not exist: no command may create it, or anything under it."""
UPPER_ID = "ABCDEFGHIJKLMNOPABCDEFGHIJKLMNOP"

USAGE_ERRORS: list[tuple[str, ...]] = [
    # dev-core
    ("dev-core", "--port", "99999"),
    ("dev-core", "--port", "-5"),
    ("dev-core", "--port", "65536"),
    ("dev-core", "--port", "1.5"),
    ("dev-core", "--port", "eighty"),
    ("dev-core", "--port"),
    ("dev-core", "--home"),
    ("dev-core", "--home", f"{ABSENT}/home"),
    ("dev-core", "--record", f"{ABSENT}/record.jsonl"),
    ("dev-core", "--generation", "future"),
    ("dev-core", "--generation"),
    ("dev-core", "--faults", '{"noSuchFault": 1}'),
    ("dev-core", "--faults", '{"hangOnType": 5}'),
    ("dev-core", "--faults", "not json"),
    ("dev-core", "--faults", f"@{ABSENT}/faults.json"),
    ("dev-core", "--version"),
    ("dev-core", "extra"),
    # demo
    ("demo", "--generation", "future"),
    ("demo", "--generation"),
    ("demo", "extra"),
    # origins
    ("origins",),
    ("origins", "forget"),
    ("origins", "approve"),
    ("origins", "approve", "http://evil.example.com"),
    ("origins", "block", "https://*"),
    ("origins", "mode"),
    ("origins", "mode", "loose"),
    ("origins", "list", "--json", "extra"),
    # install
    ("install", "--browser"),
    ("install", "--browser", "netscape"),
    ("install", "--scope", "galaxy"),
    ("install", "--extension-id"),
    ("install", "--extension-id", "tooshort"),
    ("install", "--extension-id", UPPER_ID),
    ("install", "--host-path", f"{ABSENT}/host"),
    ("install", "--host-path"),
    ("install", "--user-data-dir"),
    ("install", "--user-data-dir", f"{ABSENT}/profile"),
    ("install", "--flatpak-grant"),
    # uninstall
    ("uninstall", "--dry-run", "extra"),
    ("uninstall", "--force"),
    # tidy
    ("tidy", "extra"),
    ("tidy", "--dry-run"),
    # doctor
    ("doctor", "--timeout", "-1"),
    ("doctor", "--timeout", "0"),
    ("doctor", "--timeout", "nan"),
    ("doctor", "--timeout", "inf"),
    ("doctor", "--timeout", "1e9"),
    ("doctor", "--timeout", "soon"),
    ("doctor", "--timeout"),
    ("doctor", "--browser"),
    ("doctor", "--browser", "netscape"),
    ("doctor", "--user-data-dir"),
    ("doctor", "--user-data-dir", f"{ABSENT}/profile"),
    ("doctor", "--report"),
    ("doctor", "--report", f"{ABSENT}/report.txt"),
    # version and help
    ("version", "extra"),
    ("help", "install", "doctor"),
    ("help", "instal"),
    ("--verison",),
]


def run(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "native_host", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_the_walk_covers_every_command() -> None:
    walked = {args[0] for args in USAGE_ERRORS}
    assert set(SUBCOMMANDS) | {"version", "help"} <= walked


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_a_usage_error_is_one_line_and_exit_2(
    args: tuple[str, ...], env: dict[str, str], tmp_path: Path
) -> None:
    typed = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = run(env, *typed)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pedelec-native-host"), lines[0]
    assert not (tmp_path / "absent").exists()


def test_an_uppercase_extension_id_gets_a_lowercase_hint(env: dict[str, str]) -> None:
    done = run(env, "install", "--dry-run", "--extension-id", UPPER_ID)
    assert done.returncode == 2
    assert f"lowercase? Chrome's ids are: {UPPER_ID.lower()}" in done.stderr


def test_a_port_out_of_range_says_the_range(env: dict[str, str]) -> None:
    for value in ("99999", "-5"):
        done = run(env, "dev-core", "--port", value)
        assert f"'{value}' is not a port: 0 (any free port) to 65535" in done.stderr


def test_a_dev_core_home_whose_parent_is_missing_is_refused_and_not_created(
    env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "absent" / "x"
    done = run(env, "dev-core", "--home", str(home))
    assert done.returncode == 2
    assert f"the folder '{home.parent}' does not exist" in done.stderr
    assert not home.parent.exists()


@pytest.mark.parametrize("name", ["Chromium", "CHROMIUM", "chromium"])
def test_browser_names_are_taken_in_any_case(name: str, env: dict[str, str]) -> None:
    done = run(env, "install", "--dry-run", "--force", "--browser", name)
    assert done.returncode == 0, done.stderr
    assert "(chromium" in done.stdout  # a line of what it would write for Chromium


def test_install_help_lists_every_browser_name_of_this_system(env: dict[str, str]) -> None:
    from native_host.install.locations import rows_for

    done = run(env, "install", "--help")
    assert done.returncode == 0
    flat = " ".join(done.stdout.split()).replace("- ", "-")  # argparse wraps at hyphens
    for row in rows_for(sys.platform):
        assert row.name in flat, row.name


@pytest.mark.parametrize("words", [("version", "--help"), ("version", "-h"), ("help", "version")])
def test_version_help_is_help(words: tuple[str, ...], env: dict[str, str]) -> None:
    done = run(env, *words)
    assert done.returncode == 0, done.stderr
    assert "version" in done.stdout and done.stderr == ""


def test_dev_core_generation_has_help(env: dict[str, str]) -> None:
    done = run(env, "dev-core", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--generation {legacy,current} the protocol to serve: legacy (Pedelec 0.1.23)" in text
