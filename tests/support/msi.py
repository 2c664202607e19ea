"""The per-user MSI on the Windows lane: the package packaging/windows/build.py wrote,
Wine's `msiexec` installing and removing it, and what Windows itself says about it
(Windows Installer's own API, the registry read by `winreg`).

Everything here runs the lane's Windows Python or Wine's programs; the folders are read
on Linux through the prefix's drive_c.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from native_host import HOST_NAME
from tests.support.checkout import REPO
from tests.support.packaging_scripts import windows_module
from tests.support.wine import LANE, run_code, windows_path, wine_environment

DIST = REPO / "dist" / "windows"
BUILD_IT = "python3 packaging/windows/build.py (.ci/run builds it before the lane)"
NEWER_DIST = REPO / "dist" / "windows-newer"
"""The MSI of this tree with a higher version (the upgrade tests): `python3 -m
tests.support.msi` builds it (it needs PyPI, which the lane's network namespace lacks)."""
EXECUTABLE = "pedelec-native-host.exe"
MANIFEST = f"{HOST_NAME}.json"
INSTALLER_OWN = (
    "drive_c/windows/Installer",
    "Software\\Microsoft\\Installer",
)
"""What Windows Installer keeps of its own after any uninstall (its cache folder and its
per-user bookkeeping keys, emptied): not the package's."""


def built_msi() -> Path:
    """The one MSI in dist/windows (a test fails, saying how to build it, when there is
    none or more than one)."""
    found = sorted(DIST.glob("*.msi"))
    if len(found) != 1:
        pytest.fail(f"expected one MSI in {DIST}, found {len(found)}: {BUILD_IT}", pytrace=False)
    return found[0]


def msiexec(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    """`msiexec <args>` (with /qn: no UI), to the end. Its output goes to files, not
    pipes: the services the first Wine program of a prefix starts inherit its handles,
    and a pipe they hold would never end."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errors:
        done = subprocess.run(
            ["wine", "msiexec", *args, "/qn"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=errors,
            env=wine_environment(),
            timeout=timeout,
            check=False,
        )
        out.seek(0)
        errors.seek(0)
        return subprocess.CompletedProcess(done.args, done.returncode, out.read(), errors.read())


def install(msi: Path, **properties: str) -> subprocess.CompletedProcess[bytes]:
    return msiexec("/i", windows_path(msi), *(f"{k}={v}" for k, v in properties.items()))


def uninstall(msi: Path) -> subprocess.CompletedProcess[bytes]:
    return msiexec("/x", windows_path(msi))


def install_dir(profile: str) -> str:
    """Where the package installs for the prefix's user (Windows path)."""
    return f"{profile}\\AppData\\Local\\Programs\\pedelec-native-host"


def products() -> list[dict[str, str]]:
    """Every installed product with this package's upgrade code, as Windows Installer
    lists them (MsiEnumRelatedProductsW): its code and version."""
    code = windows_module("msi_document").UPGRADE_CODE
    script = f"""
import ctypes, json
msi = ctypes.WinDLL("msi")
found, index = [], 0
while True:
    product = ctypes.create_unicode_buffer(39)
    if msi.MsiEnumRelatedProductsW("{{{code.upper()}}}", 0, index, product) != 0:
        break
    size = ctypes.c_ulong(64)
    version = ctypes.create_unicode_buffer(64)
    msi.MsiGetProductInfoW(product.value, "VersionString", version, ctypes.byref(size))
    found.append({{"product": product.value, "version": version.value}})
    index += 1
print(json.dumps(found))
"""
    listed: list[dict[str, str]] = json.loads(run_code(script))
    return listed


_REGISTRY_WALK = """
import json, winreg
def walk(handle, name, out):
    values, index = {}, 0
    while True:
        try:
            value, data, kind = winreg.EnumValue(handle, index)
        except OSError:
            break
        values[value] = repr(data)
        index += 1
    out[name] = values
    index = 0
    while True:
        try:
            child = winreg.EnumKey(handle, index)
        except OSError:
            break
        with winreg.OpenKey(handle, child) as opened:
            walk(opened, name + "\\\\" + child, out)
        index += 1
out = {}
with winreg.OpenKey(winreg.HKEY_CURRENT_USER, "Software") as software:
    walk(software, "Software", out)
print(json.dumps(out))
"""


def hkcu_software() -> dict[str, dict[str, Any]]:
    """Every key under HKCU\\Software with its values, as Windows Python reads them."""
    walked: dict[str, dict[str, Any]] = json.loads(run_code(_REGISTRY_WALK, timeout=300))
    return walked


def drive_c_files() -> set[str]:
    """Every file and folder of the prefix's drive C: (relative to the prefix, `/`
    between names), without following a link (Wine links the profile's Desktop,
    Documents and the rest to the Unix home)."""
    found = set()
    for folder, dirs, names in os.walk(LANE.drive_c):
        for name in [*dirs, *names]:
            found.add(os.path.relpath(os.path.join(folder, name), LANE.prefix))
    return found


def left_behind(before: set[str], after: set[str], own: tuple[str, ...] = ()) -> list[str]:
    """What is in `after` and not in `before`, besides Windows Installer's own and `own`."""
    kept = INSTALLER_OWN + own
    return sorted(p for p in after - before if not any(p.startswith(k) for k in kept))


def read_key(path: str) -> str | None:
    """HKCU's default value of `path`, or None when the key is not there."""
    script = (
        "import json, winreg\n"
        "try:\n"
        f"    print(json.dumps(winreg.QueryValue(winreg.HKEY_CURRENT_USER, {path!r})))\n"
        "except FileNotFoundError:\n"
        "    print('null')\n"
    )
    value: str | None = json.loads(run_code(script))  # JSON: ASCII whatever the code page
    return value


def write_key(path: str, value: str | None) -> None:
    """Set (or, with None, delete) HKCU's default value of `path`."""
    script = (
        "import winreg\n"
        f"path, value = {path!r}, {value!r}\n"
        "if value is None:\n"
        "    try:\n"
        "        winreg.DeleteKey(winreg.HKEY_CURRENT_USER, path)\n"
        "    except FileNotFoundError:\n"
        "        pass\n"
        "else:\n"
        "    winreg.SetValue(winreg.HKEY_CURRENT_USER, path, winreg.REG_SZ, value)\n"
    )
    run_code(script)


def newer_version(version: str) -> str:
    """`X.Y.Z` -> `X.Y.(Z+1)`."""
    major, minor, build = (int(part) for part in version.split("."))
    return f"{major}.{minor}.{build + 1}"


def newer_msi() -> Path:
    """The MSI in NEWER_DIST of this tree's version plus one, built when it is not there."""
    from native_host import __version__

    wanted = newer_version(__version__)
    found = [m for m in NEWER_DIST.glob("*.msi") if f"-{wanted}-" in m.name]
    return found[0] if len(found) == 1 else build_newer_msi()


def build_newer_msi() -> Path:
    """This tree with its version raised by one (pyproject.toml and native_host), built by
    packaging/windows/build.py into NEWER_DIST."""
    import re
    import shutil
    import sys

    from native_host import __version__
    from tests.support.checkout import fresh_checkout

    source = REPO / "build" / "windows-newer-source"
    shutil.rmtree(source, ignore_errors=True)
    fresh_checkout(source)
    newer = newer_version(__version__)
    for name, key in (("pyproject.toml", "version"), ("native_host/__init__.py", "__version__")):
        path = source / name
        text, count = re.subn(rf'^{key} = "[^"]+"', f'{key} = "{newer}"', path.read_text(),
                              count=1, flags=re.M)  # fmt: skip
        assert count == 1, f"no {key} line in {name}"
        path.write_text(text)
    done = subprocess.run(
        [sys.executable, str(source / "packaging" / "windows" / "build.py"), "--out",
         str(NEWER_DIST), "--work", str(REPO / "build" / "windows-build-newer")],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    shutil.rmtree(source, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"the newer MSI was not built:\n{done.stdout}{done.stderr}")
    (msi,) = NEWER_DIST.glob(f"*-{newer}-*.msi")
    return msi


if __name__ == "__main__":
    print(build_newer_msi())
