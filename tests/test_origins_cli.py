"""`pedelec-native-host origins ...` as a real process on an isolated config dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.process

APP = "https://app.example.com"


class Cli:
    """Runs `python -m native_host origins ...` with the config dir redirected."""

    def __init__(self, config_dir: Path) -> None:
        self.config_dir = config_dir
        self.policy = config_dir / "origins.json"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PEDELEC_NATIVE_HOST_CONFIG_DIR": str(self.config_dir)}
        return subprocess.run(
            [sys.executable, "-m", "native_host", "origins", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def listing(self) -> dict[str, Any]:
        done = self("list", "--json")
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "config")


def test_list_without_a_file(cli: Cli) -> None:
    done = cli("list")
    assert done.returncode == 0
    assert str(cli.policy) in done.stdout
    assert "no file yet" in done.stdout
    assert "Mode: extension" in done.stdout
    assert cli.listing() == {"mode": "extension", "approved": [], "blocked": []}
    assert not cli.policy.exists()


def test_approve_revoke_roundtrip(cli: Cli) -> None:
    done = cli("approve", "HTTPS://App.Example.com:443")
    assert done.returncode == 0, done.stderr
    assert f"Approved {APP}" in done.stdout
    assert "mode strict" in done.stdout  # the hint that extension mode ignores approvals
    (entry,) = cli.listing()["approved"]
    assert entry["origin"] == APP
    assert isinstance(entry["approvedAt"], int)
    assert APP in cli("list").stdout
    done = cli("revoke", APP)
    assert (done.returncode, done.stdout) == (0, f"Revoked {APP}\n")
    assert cli("revoke", APP).stdout.startswith("Not approved")
    assert cli.listing()["approved"] == []


def test_block_unblock_and_mode(cli: Cli) -> None:
    assert cli("block", "HTTPS://*.Example.NET").stdout == "Blocked https://*.example.net\n"
    assert cli("mode", "strict").returncode == 0
    assert cli.listing() == {"mode": "strict", "approved": [], "blocked": ["https://*.example.net"]}
    assert "Mode: strict" in cli("list").stdout
    assert cli("approve", APP).stdout == f"Approved {APP}\n"  # no hint in strict mode
    assert cli("unblock", "https://*.example.net").stdout.startswith("Unblocked")
    assert cli("unblock", "https://*.example.net").stdout.startswith("Not on the block list")
    assert cli.listing()["blocked"] == []


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("approve", "http://evil.example.com"), "http is only allowed"),
        (("approve", "https://app.example.com/"), "path"),
        (("revoke", "null"), "null"),
        (("block", "https://*.example.com/"), "path"),
        (("block", "*.example.com"), "wildcard"),
    ],
)
def test_bad_origins_exit_2_with_the_reason(cli: Cli, args: tuple[str, ...], reason: str) -> None:
    done = cli(*args)
    assert done.returncode == 2
    assert reason in done.stderr
    assert args[1] in done.stderr
    assert not cli.policy.exists()


@pytest.mark.parametrize(
    "args", [(), ("mode", "paranoid"), ("approve",), ("list", "--bogus"), ("frobnicate",)]
)
def test_usage_errors_exit_2(cli: Cli, args: tuple[str, ...]) -> None:
    assert cli(*args).returncode == 2


@pytest.mark.parametrize(
    "command", [("list",), ("list", "--json"), ("approve", APP), ("mode", "strict")]
)
def test_corrupt_file_is_reported_with_path_and_line(cli: Cli, command: tuple[str, ...]) -> None:
    cli.config_dir.mkdir()
    content = '{\n  "mode": "strict"\n  "approved": []\n}\n'
    cli.policy.write_text(content, encoding="utf-8")
    done = cli(*command)
    assert done.returncode == 1
    assert f"{cli.policy}: line 3 column 3" in done.stderr
    assert "delete it" in done.stderr
    assert done.stdout == ""
    assert cli.policy.read_text(encoding="utf-8") == content


def test_invalid_block_entries_are_flagged_in_list(cli: Cli) -> None:
    cli.config_dir.mkdir()
    cli.policy.write_text(json.dumps({"blocked": ["https://evil.example/"]}), encoding="utf-8")
    assert "https://evil.example/  (invalid, ignored" in cli("list").stdout
    assert cli("unblock", "https://evil.example/").stdout.startswith("Unblocked")


def test_storage_failure_exits_1(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    done = Cli(blocker / "config")("approve", APP)
    assert done.returncode == 1
    assert "origin policy could not be saved" in done.stderr


def test_help_lists_the_commands(cli: Cli) -> None:
    done = cli("--help")
    assert done.returncode == 0
    for word in ("list", "approve", "revoke", "block", "unblock", "mode"):
        assert word in done.stdout
