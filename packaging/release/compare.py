"""Two builds of one commit, compared byte for byte (docs/security.md, "What you install"):

    python3 packaging/release/compare.py ARTIFACT_A ARTIFACT_B [--tree DIR_A DIR_B]

prints both SHA-256 values and exits 0 when the artifacts are identical. Otherwise it
names what differs, as diffoscope would start to: the members of a tarball or zip whose
bytes or metadata differ, the streams of an MSI (an OLE compound file), and with
`--tree`, the files of the two bundles the artifacts were made of; exit status 1.

Stdlib only, like every build script here.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from archives import sha256_of


def _tar_members(path: Path) -> dict[str, tuple[object, ...]]:
    found: dict[str, tuple[object, ...]] = {}
    with tarfile.open(path) as opened:
        for index, info in enumerate(opened.getmembers()):
            data = opened.extractfile(info) if info.isfile() else None
            digest = hashlib.sha256(data.read()).hexdigest() if data else info.linkname
            found[info.name] = (index, info.mode, info.uid, info.gid, info.uname, info.gname,
                                info.mtime, info.type, digest)  # fmt: skip
    return found


def _zip_members(path: Path) -> dict[str, tuple[object, ...]]:
    with zipfile.ZipFile(path) as opened:
        return {
            info.filename: (
                index,
                info.date_time,
                info.external_attr,
                info.compress_type,
                hashlib.sha256(opened.read(info)).hexdigest(),
            )
            for index, info in enumerate(opened.infolist())
        }


def _msi_streams(path: Path) -> dict[str, tuple[object, ...]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "windows"))
    msi_summary = importlib.import_module("msi_summary")  # packaging/windows: its reader

    data = path.read_bytes()
    compound = msi_summary._Compound(data)
    found: dict[str, tuple[object, ...]] = {}
    for entry in compound.entries:
        length = int.from_bytes(entry[64:66], "little")
        if entry[66] != 2 or length < 2:
            continue
        name = entry[: length - 2].decode("utf-16-le", "replace")
        stream = bytes(data[o] for o in compound.stream_offsets(name))
        found[name.encode("unicode_escape").decode()] = (hashlib.sha256(stream).hexdigest(),)
    return found


def members(path: Path) -> dict[str, tuple[object, ...]]:
    """What an artifact holds, by member name, with what two builds must agree on."""
    if path.name.endswith((".tar.gz", ".tgz", ".tar")):
        return _tar_members(path)
    if path.suffix in (".zip", ".whl"):
        return _zip_members(path)
    if path.suffix == ".msi":
        return _msi_streams(path)
    return {}


def differences(
    first: dict[str, tuple[object, ...]], second: dict[str, tuple[object, ...]]
) -> list[str]:
    names = sorted(set(first) | set(second))
    return [
        f"  {name}: "
        + (
            "only in A"
            if name not in second
            else "only in B"
            if name not in first
            else f"{first[name]} != {second[name]}"
        )
        for name in names
        if first.get(name) != second.get(name)
    ]


def tree(folder: Path) -> dict[str, tuple[object, ...]]:
    return {
        path.relative_to(folder).as_posix(): (sha256_of(path),)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--tree", nargs=2, type=Path, metavar=("DIR_A", "DIR_B"))
    args = parser.parse_args(argv)
    hashes = [sha256_of(args.first), sha256_of(args.second)]
    print(f"A {hashes[0]}  {args.first}\nB {hashes[1]}  {args.second}")
    if hashes[0] == hashes[1]:
        print("identical")
        return 0
    print(f"{args.first.name}: the two builds differ")
    found = differences(members(args.first), members(args.second))
    if found:
        print("members that differ (A != B):", *found, sep="\n")
    if args.tree:
        files = differences(tree(args.tree[0]), tree(args.tree[1]))
        print("bundle files that differ:", *(files or ["  none"]), sep="\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
