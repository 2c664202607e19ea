"""A second build of this tree whose internals differ from the first, with a higher
version: what every update path is tested with (issue 30).

The difference is the one the issue reproduced: a name that a module loaded after a
start (`startimage.LATER`'s, of this package) now imports from a module every start
loads (`native_host.errors`), which the older version does not have. A host of the old
version that imported one of those modules from the new files would fail with
ImportError, and its page would see "native host internal error".
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from native_host import __version__, startimage
from tests.support.checkout import REPO, fresh_checkout

MARK = "UPGRADE_VARIANT"
"""The name the newer `errors.py` defines and the newer later-loaded modules import."""
IMPORT_LINE = f"from native_host.errors import {MARK}  # noqa: F401 - tests/support/variant.py"


def newer_version(version: str = __version__) -> str:
    """`X.Y.Z` -> `X.Y.(Z+1)` (what every kind of package compares as newer)."""
    major, minor, build = (int(part) for part in version.split("."))
    return f"{major}.{minor}.{build + 1}"


def set_version(tree: Path, version: str) -> None:
    """`version` into pyproject.toml and native_host/__init__.py of `tree`."""
    for name, key in (("pyproject.toml", "version"), ("native_host/__init__.py", "__version__")):
        path = tree / name
        text, count = re.subn(
            rf'^{key} = "[^"]+"', f'{key} = "{version}"', path.read_text(), count=1, flags=re.M
        )
        assert count == 1, f"no {key} line in {name}"
        path.write_text(text)


def later_package_modules(tree: Path) -> list[Path]:
    """The source files of this package's modules a relay loads only after its start:
    `LATER`'s of every system and the package modules they import."""
    names = [n for n in startimage.LATER if n.startswith("native_host.")]
    names += ["native_host.events", "native_host.launch.spawn", "native_host.launch.trust"]
    names += ["native_host.launch.config"]
    found = []
    for name in dict.fromkeys(names):
        path = tree.joinpath(*name.split(".")).with_suffix(".py")
        assert path.is_file(), f"{name} is not at {path}"
        found.append(path)
    return found


def make_incompatible(tree: Path, version: str) -> None:
    """Turn `tree` (a copy of this checkout) into the newer, internally different build."""
    set_version(tree, version)
    errors_py = tree / "native_host" / "errors.py"
    errors_py.write_text(errors_py.read_text() + f'\n{MARK} = "{version}"\n')
    for path in later_package_modules(tree):
        text = path.read_text()
        anchor = "from __future__ import annotations\n"
        assert anchor in text, f"{path} has no {anchor!r}"
        path.write_text(text.replace(anchor, f"{anchor}\n{IMPORT_LINE}\n", 1))


def incompatible_checkout(dest: Path, version: str | None = None) -> str:
    """A fresh checkout of this tree at `dest`, made the newer, internally different
    build; returns its version."""
    shutil.rmtree(dest, ignore_errors=True)
    fresh_checkout(dest)
    newer = version or newer_version()
    make_incompatible(dest, newer)
    return newer


def build_newer(kind: str, out: Path, work: Path) -> list[Path]:
    """The newer, internally different build of `kind` (`tarball`: the Linux release
    tarball; `msi`: the Windows MSIs, per-user and per-machine), built by that tree's own
    build script into `out`; returns its artifacts, by name."""
    import subprocess
    import sys

    scripts = {"tarball": "packaging/linux/build.py", "msi": "packaging/windows/build.py"}
    source = work / "source"
    newer = incompatible_checkout(source)
    # The copy is no git checkout: its builds' time is this checkout's commit's.
    epoch = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%ct"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    done = subprocess.run(
        [
            sys.executable,
            str(source / scripts[kind]),
            "--out",
            str(out),
            "--work",
            str(work / "build"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", epoch)},
    )
    shutil.rmtree(source, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"the newer {kind} was not built:\n{done.stdout}{done.stderr}")
    suffix = {"tarball": ".tar.gz", "msi": ".msi"}[kind]
    artifacts = sorted(
        p for p in out.iterdir() if p.name.endswith(suffix) and f"-{newer}" in p.name
    )
    assert artifacts, f"no {newer} {suffix} in {out}"
    return artifacts


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="build the newer, internally different build")
    parser.add_argument("kind", choices=["tarball", "msi"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    arguments = parser.parse_args()
    print(*build_newer(arguments.kind, arguments.out, arguments.work), sep="\n")
