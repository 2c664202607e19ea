"""What every release build does with archives and downloaded files: check a file
against the SHA-256 pinned for it, unpack a zip only into the folder it is meant for, and
write tar.gz and zip files whose bytes depend on nothing but what they hold and the
commit they were built from (docs/security.md, "What you install").

Stdlib only, like every build script here.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from steps import REPO, BuildError

ZIP_EPOCH = 315532800
"""1980-01-01 00:00:00 UTC: the earliest time a zip entry can carry."""


class UnsafeArchiveError(BuildError):
    """An archive names a member outside the folder it is unpacked into."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_pinned(path: Path, expected: str, pinned_in: str) -> None:
    """`path` has the SHA-256 `expected`, pinned in `pinned_in`; otherwise the build
    stops, naming both hashes. Nothing is read from a file before this passes."""
    found = sha256_of(path)
    if found != expected:
        raise BuildError(
            f"{path.name} does not match its pinned SHA-256, refusing to use it:\n"
            f"  file:     {path}\n  expected: {expected} ({pinned_in})\n  found:    {found}\n"
            "A changed download is either tampered with or a new release: delete it to "
            "fetch it again, and change the pin only after checking the new file."
        )


def member_path(name: str) -> PurePosixPath:
    """An archive member's name as a path inside the folder being unpacked: a name that
    is absolute (`/x`, `C:x`, `\\\\x`), climbs out (`..`) or is empty is refused."""
    path = PurePosixPath(name.replace("\\", "/"))
    parts = [part for part in path.parts if part not in ("", ".")]
    if (
        not parts
        or path.is_absolute()
        or ".." in parts
        or (len(parts[0]) >= 2 and parts[0][1] == ":")
    ):
        raise UnsafeArchiveError(
            f"archive member {name!r} would be written outside the folder it is unpacked "
            "into (absolute or `..`): refusing the archive"
        )
    return PurePosixPath(*parts)


def checked_members(archive: zipfile.ZipFile) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """Every member of `archive` with its checked path, before anything is written: one
    bad name refuses the whole archive."""
    return [(info, member_path(info.filename)) for info in archive.infolist()]


def extract_zip(archive: zipfile.ZipFile, target: Path, strip: str = "") -> list[PurePosixPath]:
    """The members of `archive` under the folder `strip` (all when empty), written into
    `target` without it; returns the files written. Symbolic links are never made (their
    target would be written as a file's bytes)."""
    written = []
    prefix = member_path(strip) if strip else None
    for info, path in checked_members(archive):
        if prefix is not None:
            if not path.is_relative_to(prefix) or path == prefix:
                continue
            path = path.relative_to(prefix)
        destination = target.joinpath(*path.parts)
        if info.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(archive.read(info))
        written.append(path)
    return written


def source_date_epoch(source: Path = REPO) -> int:
    """The time every archive entry carries: `SOURCE_DATE_EPOCH` when set, else the time
    of `source`'s last commit, so two builds of one commit write the same bytes
    (reproducible-builds.org's convention)."""
    given = os.environ.get("SOURCE_DATE_EPOCH", "")
    if given:
        if not given.isdigit():
            raise BuildError(f"SOURCE_DATE_EPOCH={given!r} is not a number of seconds")
        return int(given)
    done = subprocess.run(
        ["git", "-C", str(source), "log", "-1", "--format=%ct"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise BuildError(
            f"no commit time for {source} (git log failed: {done.stderr.strip()}); "
            "set SOURCE_DATE_EPOCH to build outside a git checkout"
        )
    return int(done.stdout.strip())


def date_tree(root: Path, epoch: int) -> None:
    """Every file, folder and link under `root` (and `root`) dated `epoch`: for the
    packagers that record a file's time and take no SOURCE_DATE_EPOCH (wixl, WiX 3's
    light, pkgbuild)."""
    for path in [*tree_members(root), root]:
        os.utime(path, (epoch, epoch), follow_symlinks=False)


def tree_members(root: Path) -> list[Path]:
    """Every file, folder and link under `root`, in the byte order of their `/` names
    (what a file system lists first is no part of an archive)."""
    return sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix().encode())


def write_tar_gz(
    tarball: Path, entries: Iterable[tuple[Path, str]], epoch: int, mode_mask: int = 0o7755
) -> None:
    """A gzip-compressed POSIX tar of `entries` (a file and its name in the tar), in the
    order given, each with owner 0:0 and no names, the time `epoch`, its mode less what
    `mode_mask` clears; the gzip header names no file and carries `epoch` too."""
    partial = tarball.with_name(tarball.name + ".partial")
    with (
        partial.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path, name in entries:
            info = tar.gettarinfo(path, name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = epoch
            info.mode &= mode_mask
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as file:
                    tar.addfile(info, file)
            else:
                tar.addfile(info)
    partial.replace(tarball)


def write_zip(
    archive: Path, entries: Iterable[tuple[Path, str]], epoch: int, compression: int
) -> None:
    """A zip of `entries` (a file and its name) in the order given, each with the time
    `epoch` (not before 1980) and the same attributes, whatever the build machine's."""
    stamp = max(epoch, ZIP_EPOCH)
    when = _zip_time(stamp)
    with zipfile.ZipFile(archive, "w", compression) as opened:
        for path, name in entries:
            info = zipfile.ZipInfo(name, when)
            info.compress_type = compression
            info.create_system = 3  # Unix, whatever wrote it
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            opened.writestr(info, path.read_bytes())


def _zip_time(epoch: int) -> tuple[int, int, int, int, int, int]:
    import time

    moment = time.gmtime(epoch)
    return (moment.tm_year, moment.tm_mon, moment.tm_mday, moment.tm_hour, moment.tm_min,
            moment.tm_sec)  # fmt: skip
