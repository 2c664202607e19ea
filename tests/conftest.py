"""Shared fixtures: the host run as Chrome runs it, against a dev Core on loopback.

Every directory the host or the dev Core touches lives under the test's tmp_path.
`PEDELEC_TEST_HOST_CMD` (a path or a shell-quoted command) makes every black-box test
run another build of the host, e.g. the PyInstaller bundle.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host.hostproc import HostProcess, default_host_command, isolated_env


def host_command() -> list[str]:
    override = os.environ.get("PEDELEC_TEST_HOST_CMD")
    return shlex.split(override) if override else default_host_command()


class HostWorld:
    """One test's isolated world: directories, an optional dev Core, host processes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = isolated_env(os.environ, root)
        self.home = Path(self.env["PEDELEC_HOME"])
        self.config_dir = Path(self.env["PEDELEC_NATIVE_HOST_CONFIG_DIR"])
        self.log_dir = Path(self.env["PEDELEC_NATIVE_HOST_LOG_DIR"])
        self.home.mkdir(parents=True)
        self.config_dir.mkdir(parents=True)
        self.hosts: list[HostProcess] = []
        self.cores: list[Any] = []

    def write_config(self, config: dict[str, Any]) -> None:
        (self.config_dir / "config.json").write_text(json.dumps(config))

    def write_policy(self, policy: dict[str, Any]) -> None:
        (self.config_dir / "origins.json").write_text(json.dumps(policy))

    def start_core(self, generation: str = "legacy", **faults: Any) -> Any:
        from native_host.devcore import DevCore, DevCoreSettings, Faults

        core = DevCore(
            DevCoreSettings(home=self.home, generation=generation, faults=Faults(**faults))
        )
        core.start()
        self.cores.append(core)
        return core

    def start_host(
        self, args: list[str] | None = None, prefix: tuple[str, ...] = (), **env: str
    ) -> HostProcess:
        """The host as Chrome starts it; `prefix` wraps the command (e.g. `prlimit ...`)."""
        kwargs: dict[str, Any] = {} if args is None else {"args": args}
        host = HostProcess([*prefix, *host_command()], env={**self.env, **env}, **kwargs)
        self.hosts.append(host)
        return host

    def log_text(self) -> str:
        return "".join(p.read_text() for p in sorted(self.log_dir.glob("*.log*")))

    def close(self) -> None:
        for host in self.hosts:
            host.stop()
        for core in self.cores:
            core.stop()
        for host in self.hosts:
            host.check_protocol()


class FakeRegistry:
    """A dict standing in for the HKCU/HKLM default values the installer and doctor use."""

    def __init__(self, values: dict[Any, str] | None = None) -> None:
        self.values: dict[Any, str] = dict(values or {})

    def get_default(self, key: Any) -> str | None:
        return self.values.get(key)

    def set_default(self, key: Any, value: str) -> None:
        self.values[key] = value

    def delete(self, key: Any) -> None:
        self.values.pop(key, None)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment for install, uninstall and doctor: every directory they may
    touch (home, XDG config, Pedelec home, config, state, logs) inside tmp_path."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("PEDELEC_", "XDG_", "CHROME_"))
    }
    base.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        PEDELEC_HOME=str(tmp_path / "pedelec-home"),
        PEDELEC_NATIVE_HOST_CONFIG_DIR=str(tmp_path / "config"),
        PEDELEC_NATIVE_HOST_STATE_DIR=str(tmp_path / "state"),
        PEDELEC_NATIVE_HOST_LOG_DIR=str(tmp_path / "logs"),
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )
    return base


@pytest.fixture
def world(tmp_path: Path) -> Iterator[HostWorld]:
    w = HostWorld(tmp_path)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def wait_until() -> Callable[..., bool]:
    import time

    def wait(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return predicate()

    return wait


@pytest.fixture
def host_log(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """The host's own log, set up in-process under tmp_path; returns a reader of its text."""
    from native_host import logs

    directory = tmp_path / "host-log"
    logs.setup("info", {"PEDELEC_NATIVE_HOST_LOG_DIR": str(directory)})
    try:
        yield lambda: "".join(p.read_text() for p in sorted(directory.glob("*.log*")))
    finally:
        logs.close()
