"""How the black-box tests name paths and Desktop apps to the host under test
(tests/support/host_os.py) when it runs on native Windows beside them, the release
workflow's Windows job; and how they start a host given by path
(`PEDELEC_TEST_HOST_CMD`, tests/support/host.py). Only that job runs them on Windows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import host_os
from tests.support.host import HOST_CMD_ENV, host_command

pytestmark = pytest.mark.unit


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    built = tmp_path / "built" / "desktop-standin.exe"
    built.parent.mkdir()
    built.write_bytes(b"MZ stand-in")
    monkeypatch.setenv(host_os.DESKTOP_STANDIN_ENV, str(built))
    monkeypatch.delenv(host_os.HOST_OS_ENV, raising=False)
    return built


def test_native_windows_desktop_starts_this_pythons_dev_core(tmp_path: Path, standin: Path) -> None:
    home = tmp_path / "home with space"
    core = ["--home", str(home), "--generation", "legacy", "--record", str(tmp_path / "r.jsonl")]
    app, marker = host_os._native_windows_app(tmp_path, core)
    assert app == tmp_path / "fake-desktop" / "Pedelec.exe"
    assert app.read_bytes() == b"MZ stand-in"
    assert marker == tmp_path / "fake-desktop" / "Pedelec.started"
    command = (tmp_path / "fake-desktop" / "Pedelec.cmdline").read_text(encoding="utf-8")
    expected = [sys.executable, "-m", "native_host", "dev-core", *core]
    assert command == subprocess.list2cmdline(expected)  # paths as they are, no Z: drive


def test_a_marker_only_desktop_starts_nothing(tmp_path: Path, standin: Path) -> None:
    host_os._native_windows_app(tmp_path, None)
    assert (tmp_path / "fake-desktop" / "Pedelec.cmdline").read_text(encoding="utf-8") == ""


def test_without_the_standin_the_test_says_what_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(host_os.DESKTOP_STANDIN_ENV, str(tmp_path / "missing.exe"))
    with pytest.raises(RuntimeError, match=re.escape("desktop_standin.c")):
        host_os._native_windows_app(tmp_path, None)


def test_on_windows_the_standin_is_what_app_launch_json_names(
    tmp_path: Path, standin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    home = tmp_path / "pedelec-home"
    home.mkdir()
    app, _ = host_os.write_desktop_app(tmp_path, home, None)
    assert app.name == "Pedelec.exe"
    config = json.loads((home / "app-launch.json").read_text())
    assert config["executablePath"] == str(app)


def test_the_separator_is_the_hosts() -> None:
    assert host_os.host_separator() == os.sep


def test_the_wine_lane_keeps_its_windows_separator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(host_os.HOST_OS_ENV, host_os.WINDOWS)
    assert host_os.host_separator() == "\\"


def test_a_host_named_by_path_is_one_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = tmp_path / "Application Support" / "pedelec-native-host"
    host.parent.mkdir()
    host.write_text("")
    monkeypatch.setenv(HOST_CMD_ENV, str(host))
    assert host_command() == [str(host)]


def test_a_host_command_is_split_as_a_shell_would(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_CMD_ENV, "/usr/bin/python3 '/opt/x y/installed_host.py'")
    assert host_command() == ["/usr/bin/python3", "/opt/x y/installed_host.py"]
