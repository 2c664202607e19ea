"""The sealed start image of a bundle that carries its own interpreter (the Windows MSI,
packaging/windows), built and started here on a bundle folder of this interpreter.

A sealed image names its modules relative to the bundle, so the bundle starts from it in
whatever folder each user's installer puts it; it is not proven against the sources at
each start (docs/install.md, "The start image"), but it still obeys the rule every file
the host reads obeys, and no entry may point outside the bundle. The Windows lane
(tests/windows/test_msi.py) starts the real bundle, whose image also holds the standard
library's modules from the embeddable CPython's zip.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from native_host import startimage
from tests.support.markers import POSIX, needs_os
from tests.support.site_dir import READ_FIRST, copy_dependencies, image_bytes, image_parts
from tests.support.world import HostWorld
from tests.test_startimage import found_by_importlib, start_and_ping

pytestmark = [
    pytest.mark.process,
    needs_os(*POSIX, reason="file modes; the Windows lane starts the real bundle"),
]

REPO = Path(__file__).resolve().parent.parent
OPTIONS = ["-I", "-S"]


def make_bundle(root: Path) -> Path:
    """A bundle folder: the package in its site-packages, the sealed image beside it."""
    site = root / "site-packages"
    shutil.copytree(
        REPO / "native_host", site / "native_host", ignore=shutil.ignore_patterns("__pycache__")
    )
    copy_dependencies(site)
    root.chmod(0o700)
    image = startimage.build(sys.executable, OPTIONS, [str(site)], sealed_root=str(root))
    (root / startimage.IMAGE_NAME).write_bytes(image)
    (root / startimage.IMAGE_NAME).chmod(0o600)
    return root


def traced(bundle: Path) -> list[str]:
    """What the bundle's executable runs, under `-X importtime`."""
    site, image = bundle / "site-packages", bundle / startimage.IMAGE_NAME
    code = (
        f"import sys; sys.path += [{str(site)!r}]; from native_host.cli import start; "
        f"sys.exit(start({str(image)!r}))"
    )
    return [sys.executable, "-X", "importtime", *OPTIONS, "-c", code]


def raw_entries(image: Path) -> tuple[tuple[startimage.Entry, ...], tuple[Any, ...]]:
    """The image's two lists, as written: run at start, and held."""
    header, start, held, _ = image_parts(image)
    assert header == startimage._header(sealed=True), "a sealed image says so in its first line"
    return start, held


def test_a_sealed_image_names_only_the_bundles_modules_relative_to_it(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    start, held = raw_entries(bundle / startimage.IMAGE_NAME)
    names = {entry[0] for entry in start}
    assert {"native_host.relay", "native_host.gateway", "native_host.core.peer"} <= names
    assert {"native_host.policy", "idna.core"} <= {entry[0] for entry in held}
    assert names.isdisjoint(READ_FIRST)
    # This interpreter's standard library lies outside the bundle: imported the usual way.
    assert "json" not in names and "subprocess" not in {entry[0] for entry in held}
    paths = {entry[1] for entry in (*start, *held)}
    assert all(p.startswith(("site-packages/native_host/", "site-packages/idna/")) for p in paths)


def test_a_moved_bundle_starts_from_its_image_with_its_new_paths(
    world: HostWorld, tmp_path: Path
) -> None:
    built = make_bundle(tmp_path / "built-here")
    bundle = tmp_path / "each user's own folder"
    built.rename(bundle)
    world.start_core("current")
    at_start = {e[0] for e in startimage.read(str(bundle / startimage.IMAGE_NAME)).start}
    state, stderr = start_and_ping(world, traced(bundle))
    assert state == startimage.LOADED
    imported = found_by_importlib(stderr)
    assert sorted(imported & at_start) == [], "modules of the image were imported from disk"
    # Tracebacks and __file__ name the files where the bundle is now.
    code = (
        "from native_host import startimage; "
        f"startimage.load(startimage.read({str(bundle / startimage.IMAGE_NAME)!r}, hold=True)); "
        "import native_host.relay as relay; "
        "print(relay.__file__); print(relay.run_relay.__code__.co_filename)"
    )
    site = bundle / "site-packages"
    shown = subprocess.run(
        [sys.executable, *OPTIONS, "-c", f"import sys; sys.path += [{str(site)!r}]; {code}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert shown == [str(site / "native_host" / "relay.py")] * 2


@pytest.mark.parametrize("outside", ["../planted.py", "/etc/planted.py", "C:/planted.py", ""])
def test_an_entry_pointing_outside_the_bundle_damages_the_image(
    world: HostWorld, tmp_path: Path, outside: str
) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    image = bundle / startimage.IMAGE_NAME
    ran = tmp_path / "the entry ran"
    code = compile(f"open({str(ran)!r}, 'w').close()", "planted", "exec")
    header, start, held, held_code = image_parts(image)
    entries = ((*start, ("planted", outside, False, 0, 0, code)), held)
    image.write_bytes(image_bytes(header, entries, held_code))
    with pytest.raises(startimage.ImageUnusable) as refused:
        startimage.read(str(image))
    assert refused.value.state == startimage.DAMAGED
    assert "planted would be outside the bundle" in refused.value.detail
    world.start_core("current")
    assert start_and_ping(world, traced(bundle))[0] == startimage.DAMAGED
    assert not ran.exists()


def test_a_sealed_image_others_could_write_is_refused(world: HostWorld, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    (bundle / startimage.IMAGE_NAME).chmod(0o666)
    world.start_core("current")
    assert start_and_ping(world, traced(bundle))[0] == startimage.REFUSED
