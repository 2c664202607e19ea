"""One Windows-lane test's world: private directories on Linux that the Windows host reaches
through Z:, the dev Core on Linux loopback, and Windows hosts started as Chrome starts them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from native_host.devcore import DevCore, DevCoreSettings
from native_host.hostproc import OFFICIAL_ORIGIN
from tests.support.host import HostUnderTest
from tests.support.wine import run_host_cli, start_as_chrome, start_host_directly, windows_path

DIRS = {
    "PEDELEC_HOME": "pedelec-home",
    "PEDELEC_NATIVE_HOST_CONFIG_DIR": "config",
    "PEDELEC_NATIVE_HOST_STATE_DIR": "state",
    "PEDELEC_NATIVE_HOST_LOG_DIR": "logs",
}


class WineWorld:
    """Directories under `root` (named to the host by their Z: paths), dev Cores, hosts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs = {name: root / leaf for name, leaf in DIRS.items()}
        for directory in self.dirs.values():
            directory.mkdir(parents=True, exist_ok=True)
        self.env = {name: windows_path(path) for name, path in self.dirs.items()}
        self.home = self.dirs["PEDELEC_HOME"]
        self.config_dir = self.dirs["PEDELEC_NATIVE_HOST_CONFIG_DIR"]
        self.hosts: list[HostUnderTest] = []
        self.cores: list[DevCore] = []

    def write_config(self, config: dict[str, Any]) -> None:
        (self.config_dir / "config.json").write_text(json.dumps(config))

    def start_core(self, home: Path | None = None) -> DevCore:
        """A dev Core on Linux loopback writing runtime.json into `home` (default: this
        world's Pedelec home). Its pid there is a Linux pid, which the Windows host cannot
        see: worlds that talk to it set `checkRuntimePid: false` (docs/security.md)."""
        core = DevCore(DevCoreSettings(home=home or self.home))
        core.start()
        self.cores.append(core)
        return core

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
        return run_host_cli(args, env={**self.env, **env})

    def start_host(self, args: tuple[str, ...] = (OFFICIAL_ORIGIN,), **env: str) -> HostUnderTest:
        host = start_host_directly({**self.env, **env}, args=args)
        self.hosts.append(host)
        return host

    def start_as_chrome(self, **kwargs: Any) -> HostUnderTest:
        env = {**self.env, **kwargs.pop("env", {})}
        host = start_as_chrome(env, **kwargs)
        self.hosts.append(host)
        return host

    def close(self) -> None:
        for host in self.hosts:
            host.stop()
        for core in self.cores:
            core.stop()
        for host in self.hosts:
            host.check_protocol()
