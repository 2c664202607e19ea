"""Versions side by side (issue 30, native_host/versions.py): `install` moves the
registration to a frozen bundle's new version folder and removes the older ones no host
uses; one a process still uses stays, is named, and goes when that process exits; a
launcher's image in use is kept under a retired name, which the last host running from
it removes as it exits.

A process "uses" a version by holding its start image as a host does
(`files.hold_shared`, taken by `startimage.read(..., hold=True)`). The frozen bundles'
own end-to-end runs are the release tarball's lane (tests/test_frozen_upgrade.py) and the
MSI's on the Windows lane.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import __version__, startimage, versions
from native_host.hostproc import OFFICIAL_ORIGIN, HostProcess
from native_host.install import installer
from native_host.install.installer import InstallOptions
from tests.support.markers import POSIX, needs_os
from tests.support.site_dir import Install
from tests.support.users import skip_unless_root, throwaway_users
from tests.support.world import HostWorld

pytestmark = [pytest.mark.process, needs_os(*POSIX, reason="file modes and locks")]

HOLD = """
import sys
sys.path[:0] = [{site!r}]
from native_host import startimage
sys.frozen = True
sys.executable = {executable!r}
startimage.load(startimage.read({image!r}, hold=True))
print("holding", flush=True)
sys.stdin.readline()
from native_host import versions
print("\\n".join(versions.leave()), flush=True)
"""
"""A process that uses a version folder as a frozen host of it does: it holds the folder's
image until told to go, then leaves as the relay does (`versions.leave`)."""


def version_folder(root: Path, version: str, site: Path) -> Path:
    """`root/<version>/` as a frozen bundle's: an executable and a (sealed) start image
    of the package in `site`."""
    folder = root / version
    folder.mkdir(parents=True, mode=0o700)
    executable = folder / "pedelec-native-host"
    executable.write_text("#!/bin/sh\nexit 0\n")
    executable.chmod(0o700)
    image = startimage.build(sys.executable, ["-I", "-S"], [str(site)], sealed_root=str(folder))
    (folder / startimage.IMAGE_NAME).write_bytes(image)
    (folder / startimage.IMAGE_NAME).chmod(0o600)
    return folder


class Holder:
    """A process holding a version folder's image, like a live host of that version."""

    def __init__(self, folder: Path, site: Path) -> None:
        code = HOLD.format(
            site=str(site),
            executable=str(folder / "pedelec-native-host"),
            image=str(folder / startimage.IMAGE_NAME),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "holding\n"

    def leave(self) -> list[str]:
        """Let it go, as a relay exits; what it removed."""
        out, _ = self.proc.communicate("\n", timeout=60)
        return [line for line in out.splitlines() if line]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return Install(tmp_path / "package").site


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        if holder.proc.poll() is None:
            holder.proc.kill()
            holder.proc.wait()


def register(executable: Path, env: dict[str, str], home: Path) -> str:
    """`install --browser chromium` as the frozen bundle at `executable` runs it."""
    out = io.StringIO()
    ctx = installer.Environment(
        platform=sys.platform, env=env, home=home, executable=str(executable), frozen=True, out=out
    )
    installer.install(InstallOptions(browsers=("chromium",)), ctx)
    return out.getvalue()


def test_install_moves_the_root_to_its_version_and_removes_older_ones_nobody_uses(
    tmp_path: Path, env: dict[str, str], site: Path, holders: list[Holder]
) -> None:
    home = Path(env["HOME"])
    root = tmp_path / "share" / "pedelec-native-host"
    older, oldest = version_folder(root, "0.0.9", site), version_folder(root, "0.0.8", site)
    current = version_folder(root, __version__, site)
    (root / "notes.txt").write_text("a user's own file")  # not a version folder: kept
    holders.append(Holder(older, site))
    said = register(current / "pedelec-native-host", env, home)
    assert versions.current(str(root)) == __version__
    assert f"removed         {oldest} (version 0.0.8, no longer used)" in said
    assert f"kept            {older} (hosts of version 0.0.9 run from it" in said
    assert sorted(p.name for p in root.iterdir()) == ["0.0.9", __version__, "current", "notes.txt"]
    manifest = home / ".config" / "chromium" / "NativeMessagingHosts" / "cc.isaaclin.pedelec.json"
    assert str(current / "pedelec-native-host") in manifest.read_text()
    # The last process using the older version removes it as it leaves.
    assert holders[0].leave() == [str(older)]
    assert sorted(p.name for p in root.iterdir()) == [__version__, "current", "notes.txt"]


def tidy(executable: Path, frozen: bool = True) -> str:
    """`tidy` as the bundle at `executable` runs it (what the MSIs run as they install)."""
    out = io.StringIO()
    ctx = installer.Environment(
        platform=sys.platform, env={}, home=Path("/nonexistent"), executable=str(executable),
        frozen=frozen, out=out,
    )  # fmt: skip
    installer.tidy(ctx)
    return out.getvalue()


def test_tidy_removes_older_versions_nobody_uses_and_registers_nothing(
    tmp_path: Path, site: Path, holders: list[Holder]
) -> None:
    """The MSIs' step after their files are in (`current` is one of them): every older
    version folder no host uses goes; one in use stays, named, for its last host."""
    root = tmp_path / "Program Files" / "pedelec-native-host"
    older, oldest = version_folder(root, "0.0.9", site), version_folder(root, "0.0.8", site)
    current = version_folder(root, __version__, site)
    versions.set_current(str(root), __version__)
    holders.append(Holder(older, site))
    said = tidy(current / "pedelec-native-host")
    assert f"removed         {oldest} (version 0.0.8, no longer used)" in said
    assert f"kept            {older} (hosts of version 0.0.9 run from it" in said
    assert sorted(p.name for p in root.iterdir()) == ["0.0.9", __version__, "current"]
    assert tidy(current / "pedelec-native-host").startswith("kept ")
    assert holders[0].leave() == [str(older)]
    assert tidy(current / "pedelec-native-host") == f"unchanged       {root} (no older version)\n"


def test_tidy_never_removes_the_folder_it_runs_from(tmp_path: Path, site: Path) -> None:
    """An older bundle's `tidy` after a newer one became current: its own folder is
    retired, yet it runs from it, so it stays; the oldest goes, the current one stays."""
    root = tmp_path / "pedelec-native-host"
    older, oldest = version_folder(root, "0.0.9", site), version_folder(root, "0.0.8", site)
    version_folder(root, __version__, site)
    versions.set_current(str(root), __version__)
    said = tidy(older / "pedelec-native-host")
    assert f"removed         {oldest}" in said and str(older) + " " not in said
    assert sorted(p.name for p in root.iterdir()) == ["0.0.9", __version__, "current"]


def test_tidy_outside_a_version_folder_changes_nothing(tmp_path: Path, site: Path) -> None:
    """A launcher install (or a bundle extracted anywhere else): nothing is tidied."""
    root = tmp_path / "pedelec-native-host"
    version_folder(root, "0.0.9", site)
    current = version_folder(root, __version__, site)
    versions.set_current(str(root), __version__)
    said = tidy(current / "pedelec-native-host", frozen=False)
    assert said.startswith("unchanged ") and "not a bundle in a folder of its version" in said
    assert (root / "0.0.9").is_dir()


def test_a_version_that_is_still_current_is_never_removed(
    tmp_path: Path, site: Path, holders: list[Holder]
) -> None:
    root = tmp_path / "pedelec-native-host"
    folder = version_folder(root, __version__, site)
    versions.set_current(str(root), __version__)
    holders.append(Holder(folder, site))
    assert holders[0].leave() == []
    assert folder.is_dir()


def test_without_a_current_version_nothing_is_retired(tmp_path: Path, site: Path) -> None:
    """A folder of extracted versions that `install` never registered from: nothing there
    is anyone's to remove."""
    root = tmp_path / "pedelec-native-host"
    version_folder(root, "0.0.9", site)
    version_folder(root, __version__, site)
    assert versions.retired_folders(str(root)) == []


@pytest.mark.parametrize("current", ["../elsewhere", "", "a/b"])
def test_a_current_naming_anything_but_a_folder_of_the_root_is_ignored(
    tmp_path: Path, site: Path, current: str
) -> None:
    root = tmp_path / "pedelec-native-host"
    version_folder(root, "0.0.9", site)
    (root / "current").write_text(current + "\n")
    (root / "current").chmod(0o600)
    assert versions.current(str(root)) is None
    assert versions.retired_folders(str(root)) == []


def test_a_launchers_image_in_use_is_kept_until_its_last_host_exits(
    world: HostWorld, tmp_path: Path
) -> None:
    """`install` again while hosts run from the launcher's image (after an upgrade of the
    package): the old image is kept under a retired name, and the host removes it as it
    exits; the next host starts from the new image."""
    old = Install(tmp_path / "install")
    world.start_core("current")
    host = HostProcess([str(old.launcher)], (OFFICIAL_ORIGIN,), world.env, cwd=str(world.root))
    try:
        assert host.request({"type": "ping", "requestId": "p"})["ok"] is True
        kept = versions.retire_image(str(old.image))
        assert kept == f"{old.image}.{__version__}{versions.RETIRED}"
        assert versions.retired_images(str(old.image)) == [kept]
        old.write_image()  # install's new image
        assert versions.retire_image(str(old.image)) is None  # nobody holds the new one
        assert versions.remove_unused([kept]) == ([], [kept])
        host.close_stdin()
        assert host.wait() == 0
    finally:
        host.stop()
    assert versions.retired_images(str(old.image)) == []
    assert re.search(rf"removed {re.escape(kept)}: retired", world.log_text())


@needs_os("linux", reason="throwaway users through useradd")
def test_a_current_another_user_wrote_or_could_write_retires_nothing(
    tmp_path: Path, site: Path
) -> None:
    """`current` decides what is removed: one another user owns, or one in a root others
    can write, is not believed, and nothing there counts as retired."""
    skip_unless_root()
    root = tmp_path / "pedelec-native-host"
    version_folder(root, "0.0.9", site)
    version_folder(root, __version__, site)
    versions.set_current(str(root), __version__)
    assert versions.retired_folders(str(root)) == [str(root / "0.0.9")]
    with throwaway_users() as make_user:
        mallory = make_user()
        os.chown(root / "current", mallory.uid, mallory.gid)
        assert versions.current(str(root)) is None
        assert versions.retired_folders(str(root)) == []
    os.chown(root / "current", os.getuid(), os.getgid())
    root.chmod(0o777)
    assert versions.retired_folders(str(root)) == []
