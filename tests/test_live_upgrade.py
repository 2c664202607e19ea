"""A live host never mixes two versions' code (issue 30): whatever replaces or removes its
package while it runs, it keeps answering every request with the code it started with.

Three hosts, mid-stream, with a request in flight and idle (tests/support/live_hosts.py),
run from a copy of the package in its own site directory, through the launcher and start
image `install` writes (tests/support/site_dir.py); then the package is replaced by a
newer build whose internals differ (tests/support/variant.py), or removed altogether,
and every host answers every request type, new subscriptions, policy changes and
internationalised origins included, through a Core restart that starts the Desktop. A
host started afterwards runs the new version. The same holds for a start that could not
use its image (it imports everything it may need before it serves), and an audit hook in
the host proves the point directly: after a host starts serving, no module comes from
disk but the interpreter's own compiled ones.

The real update paths (pipx, uv, install.sh, the release tarball, the MSI) run the same
scenario in tests/test_upgrade_paths.py and on the Windows lane.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import __version__, startimage
from native_host.install.contents import ENTRY, IMAGE_ENTRY
from tests.support.live_hosts import ThreeLiveHosts
from tests.support.markers import needs_os
from tests.support.site_dir import Install
from tests.support.variant import incompatible_checkout

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="the fake Desktop is a #! script whose processes /proc tells apart"),
]

AUDIT_HOOK = """
import os, sys
_log = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
_serving = []
def _hook(event, args):
    if event == {serving!r}:
        _serving.append(True)
    elif _serving and event == "import":
        os.write(_log, ("import " + args[0] + "\\n").encode())
    elif _serving and event == "open" and isinstance(args[0], str):
        if args[0].endswith((".py", ".pyc", ".so", ".zip")):
            os.write(_log, ("open " + args[0] + "\\n").encode())
sys.addaudithook(_hook)
"""
"""Injected ahead of the launcher's own code: every import and every open of a code file
after the relay's serving event, one line each, written at once (the relay leaves
through os._exit)."""


@pytest.fixture
def old(tmp_path: Path) -> Install:
    """This tree's package, installed as `install` would leave it."""
    return Install(tmp_path / "install")


@pytest.fixture(scope="module")
def newer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The newer, internally different build's tree, and its version."""
    tree = tmp_path_factory.mktemp("newer") / "tree"
    return tree, incompatible_checkout(tree)


@pytest.fixture
def live(tmp_path: Path, old: Install) -> Iterator[ThreeLiveHosts]:
    env = ThreeLiveHosts.environment(tmp_path / "world")
    hosts = ThreeLiveHosts(tmp_path / "world", lambda: [str(old.launcher)], env)
    try:
        yield hosts
    finally:
        hosts.close()


def replace_package(site: Path, tree: Path) -> None:
    """What `pip install --force-reinstall` of the newer build does to the site directory."""
    shutil.rmtree(site / "native_host")
    shutil.copytree(tree / "native_host", site / "native_host")


@pytest.mark.parametrize("upgrade", ["replaced by a newer build", "removed"])
def test_live_hosts_keep_answering_whatever_happens_to_their_package(
    live: ThreeLiveHosts, old: Install, newer: tuple[Path, str], upgrade: str
) -> None:
    live.start()
    assert {state for _, state in live.starts().values()} == {startimage.LOADED}
    if upgrade == "removed":
        for name in ("native_host", "idna"):
            shutil.rmtree(old.site / name)
    else:
        replace_package(old.site, newer[0])
    live.after_upgrade()
    live.core_restart()
    assert live.versions() == {__version__}
    if upgrade == "removed":
        return
    # The next start runs the new version: from its modules on disk (the image is stale
    # until `install` runs again), then from the new image `install` writes.
    assert live.next_start() == (newer[1], startimage.STALE)
    old.write_image()
    assert live.next_start() == (newer[1], startimage.LOADED)


def test_a_start_without_an_image_loads_everything_before_it_serves(
    tmp_path: Path, old: Install, newer: tuple[Path, str]
) -> None:
    """The console script's start, or any start whose image is missing, stale or
    refused: the relay imports `LATER` before its first frame, so the same holds."""
    code = f"import sys; sys.path += [{str(old.site)!r}]; {ENTRY.removeprefix('import sys; ')}"
    command = [sys.executable, "-I", "-S", "-c", code]
    env = ThreeLiveHosts.environment(tmp_path / "world")
    live = ThreeLiveHosts(tmp_path / "world", lambda: command, env)
    try:
        live.start()
        assert {state for _, state in live.starts().values()} == {startimage.NONE}
        replace_package(old.site, newer[0])
        live.after_upgrade()
        live.core_restart()
        assert live.versions() == {__version__}
        assert live.next_start() == (newer[1], startimage.NONE)
    finally:
        live.close()


def read_nothing(name: str) -> bool:
    """A module whose import reads no code from a file the package ships: built into the
    interpreter or frozen in it, a compiled module of its own standard library (what an
    image cannot hold, and what no update of the package replaces), or one that exists
    nowhere (the standard library tries a few: `org.python.core` for Jython, `msvcrt` on
    Linux)."""
    if name in sys.builtin_module_names:
        return True
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent exists nowhere either
        return True
    if spec is None or spec.origin == "frozen":
        return True
    if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return False
    stdlib = Path(os.__file__).resolve().parent
    return Path(str(spec.origin)).resolve().is_relative_to(stdlib)


@pytest.mark.parametrize("image", [True, False], ids=["through its image", "without an image"])
def test_after_it_starts_serving_a_host_imports_nothing_from_disk(
    tmp_path: Path, old: Install, image: bool
) -> None:
    """Every request type, a Core restart with the Desktop's launch, new subscriptions,
    the policy and internationalised origins, under an audit hook: once the relay serves,
    every module it imports comes from its image's held ones (or, without an image, none
    is imported at all), never from a file, but the interpreter's compiled ones."""
    audit = tmp_path / "audit.log"
    hook = AUDIT_HOOK.format(log=str(audit), serving=startimage.SERVING_EVENT)
    entry = ENTRY if not image else IMAGE_ENTRY.format(image=repr(str(old.image)))
    entry = entry.removeprefix("import sys; ")
    code = f"{hook}\nsys.path += [{str(old.site)!r}]\n{entry}"
    env = ThreeLiveHosts.environment(tmp_path / "world")
    live = ThreeLiveHosts(tmp_path / "world", lambda: [sys.executable, "-I", "-S", "-c", code], env)
    try:
        live.start()
        live.after_upgrade()
        live.core_restart()
    finally:
        live.close()
    lines = audit.read_text().splitlines() if audit.exists() else []
    opened = [line for line in lines if line.startswith("open ")]
    assert opened == [], "code files were read after the relay started serving"
    imported = {line.removeprefix("import ") for line in lines if line.startswith("import ")}
    held = startimage.read(str(old.image)).names() if image else set()
    from_disk = sorted(n for n in imported - held if not read_nothing(n))
    assert from_disk == [], "modules were imported from disk after the relay started serving"
    if image:
        assert {"native_host.policy", "native_host.launch.launcher", "idna.core"} <= imported
    else:
        assert imported <= {n for n in imported if read_nothing(n)}
