"""What a relay start imports before it answers its first ping, pinned (issues 14, 19).

Chrome starts a host for every burst of page activity, and the current extension pings
on every page load: the modules a ping needs are a short, deliberate list. The host is
started as the launcher `install` writes starts it (`python -I -S -c <the launcher's
entry> <origin>`, from the start image of a copy of the package), traced with
`-X importtime`, answers one ping through a real dev Core, and exits. What it loaded is
what the import system found plus what the image executed at start; what the
interpreter's own start-up imports is measured the same way and set aside. (The modules
the image holds for later, and that a start without an image imports before it serves,
are `startimage.LATER`'s: tests/test_live_upgrade.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from native_host import startimage
from native_host.hostproc import OFFICIAL_ORIGIN, HostProcess
from tests.support.site_dir import Install
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

RELAY_MODULES = frozenset(
    {
        # the host's own, in layer order (docs/architecture.md)
        *(
            "native_host",
            "native_host.cli",
            "native_host.relay",
            "native_host.outbox",
            "native_host.gateway",
            "native_host.admission",
            "native_host.core",
            "native_host.core.connection",
            "native_host.core.discovery",
            "native_host.core.lines",
            "native_host.core.peer",
            "native_host.core.peer.rule",
            "native_host.core.peer.linux",
            "native_host.messages",
            "native_host.extension",
            "native_host.config",
            "native_host.logs",
            "native_host.files",
            "native_host.startimage",
            "native_host.versions",  # as the relay exits (from the image: issue 30)
            "native_host.framing",
            "native_host.paths",
            "native_host.codec",
            "native_host.errors",
        ),
        # JSON with what it brings, and the built-ins a relay needs
        *("json", "json.decoder", "json.scanner", "json.encoder", "_json"),
        *("re", "re._compiler", "re._parser", "re._constants", "re._casefix", "_sre"),
        *("enum", "functools", "collections", "keyword", "operator", "reprlib", "types"),
        *("itertools", "_collections", "_functools", "_operator", "copyreg"),
        *("_socket", "_thread", "errno", "struct", "_struct", "fcntl", "stat", "_stat"),
        *("os", "posixpath", "genericpath", "_collections_abc", "time", "__future__", "gc"),
        *("importlib", "importlib._bootstrap", "importlib._bootstrap_external"),
        *("importlib.machinery", "zipimport", "atexit"),
    }
)
"""Everything a ping may load beyond the interpreter's own start-up. Not here on
purpose: what NEVER lists."""
OTHER_SYSTEMS = {
    "linux": ("native_host.core.peer.windows", "native_host.core.peer.macos", "ctypes"),
    "darwin": ("native_host.core.peer.windows", "native_host.core.peer.linux"),
    "win32": ("native_host.core.peer.linux", "native_host.core.peer.macos"),
}
"""Code only other systems run (the peer check is one module per system)."""
NEVER = frozenset(
    {
        *("logging", "pathlib", "typing", "dataclasses", "inspect", "platformdirs"),
        *("pydantic", "idna", "tempfile", "shutil", "subprocess", "urllib", "argparse"),
        *("unicodedata", "encodings.idna", "ipaddress", "stringprep"),
        # the wrappers of the built-ins a relay uses: `socket` (its enums, `selectors`)
        # and `threading` cost a start more than the whole peer check (issue 19)
        *("socket", "selectors", "threading", "collections.abc", "runpy"),
        *OTHER_SYSTEMS.get(sys.platform, ()),
    }
)


def imported(stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[-1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def startup_baseline(env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-I", "-S", "-c", "pass"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    return imported(done.stderr)


def test_a_ping_loads_only_the_pinned_modules(world: HostWorld, tmp_path: Path) -> None:
    install = Install(tmp_path / "install")
    world.start_core("current")
    with HostProcess(install.traced(), (OFFICIAL_ORIGIN,), world.env, cwd=str(world.root)) as host:
        assert host.request({"type": "ping", "requestId": "p"})["ok"]
        host.close_stdin()
        assert host.wait() == 0
    assert f"image={startimage.LOADED}" in world.log_text()
    executed = {entry[0] for entry in startimage.read(str(install.image)).start}
    loaded = imported(host.final_stderr(timeout=10)) | executed
    extra = loaded - startup_baseline(world.env)
    assert "native_host.relay" in extra and "_socket" in extra
    assert sorted(extra - RELAY_MODULES) == [], "a ping now loads more than the pinned list"
    assert sorted(extra & NEVER) == []
