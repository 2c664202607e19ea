"""One black-box test's world: private directories, dev Cores and hosts run as Chrome runs
them. Every directory the host or the dev Core touches lives under the test's own root."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from native_host.devcore import DevCore, DevCoreSettings, Faults
from native_host.hostproc import isolated_env
from tests.support.host import HostUnderTest, host_command


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
        self.hosts: list[HostUnderTest] = []
        self.cores: list[DevCore] = []

    def write_config(self, config: dict[str, Any]) -> None:
        (self.config_dir / "config.json").write_text(json.dumps(config))

    def write_policy(self, policy: dict[str, Any]) -> None:
        (self.config_dir / "origins.json").write_text(json.dumps(policy))

    def start_core(self, generation: str = "legacy", **faults: Any) -> DevCore:
        """A dev Core on this world's Pedelec home (it writes runtime.json there)."""
        settings = DevCoreSettings(home=self.home, generation=generation, faults=Faults(**faults))
        core = DevCore(settings)
        core.start()
        self.cores.append(core)
        return core

    def start_host(
        self, args: list[str] | None = None, prefix: tuple[str, ...] = (), **env: str
    ) -> HostUnderTest:
        """The host as Chrome starts it; `prefix` wraps the command (e.g. `prlimit ...`)."""
        kwargs: dict[str, Any] = {} if args is None else {"args": args}
        host = HostUnderTest([*prefix, *host_command()], env={**self.env, **env}, **kwargs)
        self.hosts.append(host)
        return host

    def log_text(self) -> str:
        return "".join(p.read_text() for p in sorted(self.log_dir.glob("*.log*")))

    def close(self) -> None:
        """Stop every host and Core; then fail if a host ever wrote a bad frame, or if
        any input reached one of the host's safety nets (each logs its traceback: the
        "internal error" answers and the stream reader's failure), which no input may."""
        for host in self.hosts:
            host.stop()
        for core in self.cores:
            core.stop()
        for host in self.hosts:
            host.check_protocol()
        if self.hosts and "Traceback" in (log := self.log_text()):
            at = log.index("Traceback")
            raise AssertionError(
                f"a host logged a traceback:\n{log[max(0, at - 1500) : at + 2500]}"
            )
