"""Where things live: the Pedelec home and this host's config, state and log dirs (spec 7.16).

Every function takes the environment as an argument so tests can redirect everything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "pedelec-native-host"
RUNTIME_FILE = "runtime.json"
LAUNCH_CONFIG_FILE = "app-launch.json"
CONFIG_FILE = "config.json"
POLICY_FILE = "origins.json"
LAUNCH_LOCK_FILE = "launch.lock"


def user_home(env: Mapping[str, str]) -> Path:
    """The OS user home; under Snap, the real one that holds `~/.pedelec` (spec 5.4)."""
    snap_home = env.get("SNAP_REAL_HOME")
    if snap_home:
        return Path(snap_home)
    home = env.get("HOME") or env.get("USERPROFILE")
    if home:
        return Path(home)
    return Path.home()


def pedelec_home(env: Mapping[str, str] = os.environ) -> Path:
    """The directory holding `runtime.json` and `app-launch.json`."""
    override = env.get("PEDELEC_HOME")
    if override:
        return Path(override)
    return user_home(env) / ".pedelec"


def _host_dir(env: Mapping[str, str], override_variable: str, platformdirs_function: str) -> Path:
    """An environment override (what tests use), else the platformdirs directory."""
    override = env.get(override_variable)
    if override:
        return Path(override)
    import platformdirs

    directory: str = getattr(platformdirs, platformdirs_function)(APP_NAME, appauthor=False)
    return Path(directory)


def config_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Directory of `config.json` and `origins.json`."""
    return _host_dir(env, "PEDELEC_NATIVE_HOST_CONFIG_DIR", "user_config_dir")


def state_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Directory of `launch.lock`: the XDG runtime dir where there is one, else the state dir."""
    has_runtime_dir = os.name == "posix" and bool(env.get("XDG_RUNTIME_DIR"))
    function = "user_runtime_dir" if has_runtime_dir else "user_state_dir"
    return _host_dir(env, "PEDELEC_NATIVE_HOST_STATE_DIR", function)


def install_record_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Durable directory for install records (a runtime dir is wiped at logout)."""
    return _host_dir(env, "PEDELEC_NATIVE_HOST_STATE_DIR", "user_state_dir")


def log_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Directory of the rotating log file."""
    return _host_dir(env, "PEDELEC_NATIVE_HOST_LOG_DIR", "user_log_dir")
