"""Where things live: the Pedelec home and this host's config, state and log dirs (spec 7.16).

The per-OS directories are a table (the XDG Base Directory rules on Linux, the usual
folders on macOS and Windows — the same answers platformdirs gives, which a test checks)
so that a relay start pays for neither platformdirs nor pathlib. Every function takes
the environment, so tests can redirect everything; each returns a string path.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

APP_NAME = "pedelec-native-host"
RUNTIME_FILE = "runtime.json"
LAUNCH_CONFIG_FILE = "app-launch.json"
CONFIG_FILE = "config.json"
POLICY_FILE = "origins.json"
LAUNCH_LOCK_FILE = "launch.lock"

# kind -> (XDG variable or "", default under the home, suffix after the app name)
LINUX_DIRS = {
    "config": ("XDG_CONFIG_HOME", ".config", ""),
    "state": ("XDG_STATE_HOME", ".local/state", ""),
    "log": ("XDG_STATE_HOME", ".local/state", "log"),
}
MACOS_DIRS = {
    "config": ("", "Library/Application Support", ""),
    "state": ("", "Library/Application Support", ""),
    "log": ("", "Library/Logs", ""),
}
WINDOWS_DIRS = {
    "config": ("LOCALAPPDATA", "AppData/Local", ""),
    "state": ("LOCALAPPDATA", "AppData/Local", ""),
    "log": ("LOCALAPPDATA", "AppData/Local", "Logs"),
}
"""On Windows the variable is not XDG but %LOCALAPPDATA%, always set by the system."""


HOME_VARIABLES = {"win32": ("USERPROFILE",)}
"""The variables naming the user's home, by platform (default: the POSIX ones). Windows:
%USERPROFILE%, where the Desktop writes `.pedelec` and browsers keep their data; never
HOME, which Git Bash, MSYS2, Cygwin, Emacs or a corporate `H:` set to somewhere else
(Python's own `expanduser` stopped reading it on Windows in 3.8)."""
POSIX_HOME_VARIABLES = ("SNAP_REAL_HOME", "HOME")
"""Under Snap, SNAP_REAL_HOME is the real home that holds `~/.pedelec` (spec 5.4)."""


def user_home(env: Mapping[str, str], platform: str = sys.platform) -> str:
    """The OS user home on `platform`, the one rule the host, `doctor` and `install` share."""
    for key in HOME_VARIABLES.get(platform, POSIX_HOME_VARIABLES):
        if env.get(key):
            return env[key]
    home = os.path.expanduser("~") if platform == sys.platform else ""
    if not _flavour(platform).isabs(home):
        raise RuntimeError("cannot resolve the user home directory")
    return home


def pedelec_home(env: Mapping[str, str] = os.environ, platform: str = sys.platform) -> str:
    """The directory holding `runtime.json` and `app-launch.json`."""
    override = env.get("PEDELEC_HOME")
    if override:
        return override
    joined: str = _flavour(platform).join(user_home(env, platform), ".pedelec")
    return joined


def platform_dir(kind: str, env: Mapping[str, str], platform: str = sys.platform) -> str:
    """This host's `config`, `state` or `log` directory on `platform`, from the table."""
    table = (
        WINDOWS_DIRS if platform == "win32" else MACOS_DIRS if platform == "darwin" else LINUX_DIRS
    )
    flavour = _flavour(platform)
    variable, default, suffix = table[kind]
    base = env.get(variable, "") if variable else ""
    if not flavour.isabs(base):  # XDG: a relative value is invalid and ignored
        base = flavour.join(user_home(env, platform), *default.split("/"))
    parts = (base, APP_NAME, suffix) if suffix else (base, APP_NAME)
    joined: str = flavour.join(*parts)
    return joined


def _flavour(platform: str) -> ModuleType:
    """This OS's path rules, or those of the one asked about (tests ask about all three)."""
    if platform == sys.platform:
        return os.path
    if platform == "win32":
        import ntpath

        return ntpath
    import posixpath

    return posixpath


def _host_dir(env: Mapping[str, str], override_variable: str, kind: str) -> str:
    """An environment override (what tests use), else the table's directory."""
    return env.get(override_variable) or platform_dir(kind, env)


def config_dir(env: Mapping[str, str] = os.environ) -> str:
    """Directory of `config.json` and `origins.json`."""
    return _host_dir(env, "PEDELEC_NATIVE_HOST_CONFIG_DIR", "config")


def state_dir(env: Mapping[str, str] = os.environ) -> str:
    """Directory of `launch.lock`: `$XDG_RUNTIME_DIR/pedelec-native-host` where there is
    one (POSIX), else the state dir."""
    override = env.get("PEDELEC_NATIVE_HOST_STATE_DIR")
    if override:
        return override
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if os.name == "posix" and os.path.isabs(runtime):
        return os.path.join(runtime, APP_NAME)
    return platform_dir("state", env)


def install_record_dir(env: Mapping[str, str] = os.environ) -> str:
    """Durable directory for install records (a runtime dir is wiped at logout)."""
    return _host_dir(env, "PEDELEC_NATIVE_HOST_STATE_DIR", "state")


def log_dir(env: Mapping[str, str] = os.environ) -> str:
    """Directory of the rotating log file."""
    return _host_dir(env, "PEDELEC_NATIVE_HOST_LOG_DIR", "log")
