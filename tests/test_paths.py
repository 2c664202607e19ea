"""The host's directories: the table in paths.py gives what platformdirs gives (spec 7.16).

paths.py holds the per-OS directories as data so that a relay start loads neither
platformdirs nor pathlib; platformdirs stays the reference it is checked against, for
Linux (with and without the XDG variables) and macOS. Windows is asked of the Win32 API
by platformdirs, which cannot run here: the table's %LOCALAPPDATA% rows are checked
against platformdirs' documented layout instead.
"""

from __future__ import annotations

import os
import sys

import platformdirs.macos
import platformdirs.unix
import pytest

from native_host import paths
from native_host.install import locations

pytestmark = pytest.mark.unit

APP = paths.APP_NAME


@pytest.mark.parametrize(
    "xdg",
    [{}, {"XDG_CONFIG_HOME": "/x/config", "XDG_STATE_HOME": "/x/state"}],
    ids=["defaults", "xdg-variables"],
)
def test_linux_directories_are_platformdirs(
    monkeypatch: pytest.MonkeyPatch, xdg: dict[str, str]
) -> None:
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in xdg.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", "/home/ann")
    reference = platformdirs.unix.Unix(APP, appauthor=False)
    env = dict(os.environ)
    assert paths.platform_dir("config", env, "linux") == reference.user_config_dir
    assert paths.platform_dir("state", env, "linux") == reference.user_state_dir
    assert paths.platform_dir("log", env, "linux") == reference.user_log_dir


def test_a_relative_xdg_value_is_ignored_as_the_spec_says() -> None:
    env = {"HOME": "/home/ann", "XDG_CONFIG_HOME": "relative/dir"}
    assert paths.platform_dir("config", env, "linux") == f"/home/ann/.config/{APP}"


def test_macos_directories_are_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/Users/ann")
    reference = platformdirs.macos.MacOS(APP, appauthor=False)
    env = dict(os.environ)
    assert paths.platform_dir("config", env, "darwin") == reference.user_config_dir
    assert paths.platform_dir("log", env, "darwin") == reference.user_log_dir


def test_windows_directories_follow_localappdata() -> None:
    env = {"USERPROFILE": r"C:\Users\ann", "LOCALAPPDATA": r"C:\Users\ann\AppData\Local"}
    local = env["LOCALAPPDATA"]
    assert paths.platform_dir("config", env, "win32") == rf"{local}\{APP}"
    assert paths.platform_dir("log", env, "win32") == rf"{local}\{APP}\Logs"
    without = {"USERPROFILE": r"C:\Users\ann"}
    assert paths.platform_dir("config", without, "win32") == rf"C:\Users\ann\AppData\Local\{APP}"


def test_overrides_win_and_the_runtime_dir_holds_the_lock() -> None:
    env = {"HOME": "/home/ann", "XDG_RUNTIME_DIR": "/run/user/1000"}
    assert paths.state_dir(env) == f"/run/user/1000/{APP}"
    assert paths.install_record_dir(env) == f"/home/ann/.local/state/{APP}"
    overridden = {**env, "PEDELEC_NATIVE_HOST_STATE_DIR": "/t/state"}
    assert paths.state_dir(overridden) == paths.install_record_dir(overridden) == "/t/state"
    assert paths.pedelec_home({"HOME": "/home/ann"}) == "/home/ann/.pedelec"
    assert paths.pedelec_home({"SNAP_REAL_HOME": "/home/ann", "HOME": "/snap/x"}) == (
        "/home/ann/.pedelec"
    )


def test_windows_home_is_userprofile_never_home() -> None:
    """Git Bash, MSYS2, Cygwin or a corporate `H:` set HOME on Windows; the Desktop writes
    %USERPROFILE%\\.pedelec, and the host, doctor and install must all look there."""
    env = {"HOME": r"H:\\", "USERPROFILE": r"C:\Users\ann"}
    assert paths.user_home(env, "win32") == r"C:\Users\ann"
    assert paths.pedelec_home(env, "win32") == r"C:\Users\ann\.pedelec"
    assert paths.platform_dir("config", env, "win32") == rf"C:\Users\ann\AppData\Local\{APP}"
    assert str(locations.home_from_env(env, "win32")) == r"C:\Users\ann"
    if sys.platform != "win32":  # on Windows itself, expanduser asks the OS instead
        with pytest.raises(RuntimeError):
            paths.user_home({"HOME": r"H:\\"}, "win32")
