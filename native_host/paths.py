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


def config_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Directory of `config.json` and `origins.json`."""
    override = env.get("PEDELEC_NATIVE_HOST_CONFIG_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def state_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Directory of `launch.lock` and install records: the runtime dir, else the state dir."""
    override = env.get("PEDELEC_NATIVE_HOST_STATE_DIR")
    if override:
        return Path(override)
    import platformdirs

    if os.name == "posix" and env.get("XDG_RUNTIME_DIR"):
        return Path(platformdirs.user_runtime_dir(APP_NAME, appauthor=False))
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


def install_record_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Durable directory for install records (a runtime dir is wiped at logout)."""
    override = env.get("PEDELEC_NATIVE_HOST_STATE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


def log_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Directory of the rotating log file."""
    override = env.get("PEDELEC_NATIVE_HOST_LOG_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))
