"""Build the Linux release tarball from this tree:

    python3 packaging/linux/build.py [--out DIR] [--work DIR]

writes DIR/pedelec-native-host/ (the PyInstaller onedir bundle) and exactly one
DIR/pedelec-native-host-<version>-linux-<machine>.tar.gz (DIR defaults to dist/linux).
The tarball holds the bundle in a folder named for its version under one top folder,
`pedelec-native-host/<version>/`, so a user extracts it where it is to live and runs
its `install` (docs/install.md, "Release artifacts"): `tar -xzf <tarball> -C
~/.local/share` gives ~/.local/share/pedelec-native-host/<version>/pedelec-native-host.
A newer tarball extracted the same way adds its own folder beside the older one and
touches none of its files (hosts may be running from them); its `install` moves the
registration over and the older folder goes once no host runs from it
(native_host/versions.py).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "release"))

import archives  # noqa: E402 - packaging/release: reproducible archives
import frozen  # noqa: E402 - packaging/release, shared with the macOS build
import steps  # noqa: E402 - packaging/release, shared by every release build

TARBALL = "pedelec-native-host-{version}-linux-{machine}.tar.gz"
TOP = frozen.BUNDLE_NAME
"""The tarball's one top folder (the versions root); the bundle is in `TOP/<version>/`."""
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
"""`platform.machine()` values, as the tarball names them (the kernel's words)."""
SYSTEM: str = sys.platform
"""Where this runs (a plain str: a type checker on macOS would call the build
unreachable)."""
NOT_WRITABLE_BY_OTHERS = 0o7755
"""The host refuses files that others can write (docs/security.md): no group or other
write bit goes into the tarball, whatever the build machine's umask was."""


def tarball_name(version: str, machine: str) -> str:
    """The tarball's file name for `version` built on `machine` (`platform.machine()`)."""
    if machine.lower() not in MACHINES:
        known = ", ".join(sorted(MACHINES))
        raise steps.BuildError(f"no tarball name for machine {machine!r} (known: {known})")
    return TARBALL.format(version=version, machine=MACHINES[machine.lower()])


def write_tarball(bundle: Path, tarball: Path, epoch: int, version: str) -> Path:
    """`bundle`'s files under `TOP/<version>/`, in byte order of their names, symbolic
    links kept as links (a link out of the bundle is refused), each as every user's
    extraction should see it: no build machine's owner, no write bit for others, the time
    `epoch` (archives.write_tar_gz: the same bytes from the same commit)."""
    members = archives.tree_members(bundle)
    for path in members:
        if path.is_symlink():
            target = (path.parent / path.readlink()).resolve()
            if not target.is_relative_to(bundle.resolve()):
                raise steps.BuildError(f"{path} links out of the bundle, to {target}")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    entries = [(bundle, TOP), (bundle, f"{TOP}/{version}")]
    entries += [
        (path, f"{TOP}/{version}/{path.relative_to(bundle).as_posix()}") for path in members
    ]
    archives.write_tar_gz(tarball, entries, epoch, NOT_WRITABLE_BY_OTHERS)
    return tarball


def build(out: Path, work: Path) -> Path:
    """The bundle and the tarball; returns the tarball's path."""
    if not SYSTEM.startswith("linux"):
        raise steps.BuildError(f"the Linux tarball is built on Linux, not {SYSTEM}")
    print("-- PyInstaller onedir bundle", flush=True)
    executable = frozen.build_bundle(out, work)
    version = steps.project_version()
    name = tarball_name(version, platform.machine())
    for old in out.glob("pedelec-native-host-*.tar.gz"):
        old.unlink()
    print(f"-- {name}", flush=True)
    tarball = write_tarball(executable.parent, out / name, archives.source_date_epoch(), version)
    print(f"-- wrote {tarball} ({tarball.stat().st_size / 1_048_576:.1f} MiB)", flush=True)
    return tarball


def main(argv: Sequence[str] | None = None) -> int:
    return steps.main(
        argv, doc=__doc__, build=build, system="linux", work_help="PyInstaller's work folder"
    )


if __name__ == "__main__":
    sys.exit(main())
