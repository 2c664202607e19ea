"""The MSIs on the Windows lane: the per-user and the per-machine package
packaging/windows/build.py wrote, Wine's `msiexec` installing and removing them, and what
Windows itself says about them (Windows Installer's own API, the registry read by
`winreg`).

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
from tests.support.variant import build_newer, newer_version
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


PER_USER = "per-user"
PER_MACHINE = "per-machine"
MACHINE_INSTALL_DIR = "C:\\Program Files\\pedelec-native-host"
"""Where the per-machine package installs (%ProgramFiles% of the prefix)."""
POLICY_KEY = "SOFTWARE\\Policies\\Google\\Chrome"
USER_LEVEL_HOSTS = "NativeMessagingUserLevelHosts"


def package_scope(scope: str) -> Any:
    """msi_document's `PackageScope` called `scope` (`per-user` or `per-machine`)."""
    scopes = {s.name: s for s in windows_module("msi_document").SCOPES}
    return scopes[scope]


def msi_in(folder: Path, scope: str) -> Path | None:
    """The `scope` MSI in `folder` (any version), when there is exactly one."""
    pattern = package_scope(scope).msi_name.replace("{version}", "*")
    found = [m for m in folder.glob(pattern) if m.name.count("-") == pattern.count("-")]
    return found[0] if len(found) == 1 else None


def built_msi(scope: str = PER_USER) -> Path:
    """The `scope` MSI in dist/windows (a test fails, saying how to build it, when there
    is none or more than one)."""
    found = msi_in(DIST, scope)
    if found is None:
        pytest.fail(f"expected one {scope} MSI in {DIST}: {BUILD_IT}", pytrace=False)
    return found


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


def version_dir(folder: str, version: str | None = None) -> str:
    """The folder of one version's bundle in the install folder (this tree's by default)."""
    from native_host import __version__

    return f"{folder}\\{version or __version__}"


def products(scope: str = PER_USER) -> list[dict[str, str]]:
    """Every installed product with the `scope` package's upgrade code, as Windows
    Installer lists them (MsiEnumRelatedProductsW): its code and version."""
    code = package_scope(scope).upgrade_code
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


def installed_apps_entries() -> list[str]:
    """The Installed apps (Add/Remove Programs) entries of this package: the Uninstall
    subkeys, under HKCU and HKLM (Wine writes a per-user product's there), whose
    DisplayName is the package's product name."""
    name = windows_module("msi_document").PRODUCT_NAME
    apps = r"Software\Microsoft\Windows\CurrentVersion\Uninstall"
    script = f"""
import json, winreg
found = []
for hive in (winreg.HKEY_CURRENT_USER, winreg.HKEY_LOCAL_MACHINE):
    try:
        apps = winreg.OpenKey(hive, {apps!r})
    except FileNotFoundError:
        continue
    index = 0
    while True:
        try:
            child = winreg.EnumKey(apps, index)
        except OSError:
            break
        index += 1
        with winreg.OpenKey(apps, child) as entry:
            try:
                shown = winreg.QueryValueEx(entry, "DisplayName")[0]
            except FileNotFoundError:
                continue
        if shown == {name!r}:
            found.append(child)
print(json.dumps(found))
"""
    entries: list[str] = json.loads(run_code(script))
    return entries


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
with winreg.OpenKey(HIVE, "Software") as software:
    walk(software, "Software", out)
print(json.dumps(out))
"""


def hkcu_software() -> dict[str, dict[str, Any]]:
    """Every key under HKCU\\Software with its values, as Windows Python reads them."""
    code = "import winreg; HIVE = winreg.HKEY_CURRENT_USER\n" + _REGISTRY_WALK
    walked: dict[str, dict[str, Any]] = json.loads(run_code(code, timeout=300))
    return walked


def hklm_software() -> dict[str, dict[str, Any]]:
    """Every key under HKLM\\SOFTWARE (its 64-bit view, WOW6432Node included)."""
    code = "import winreg; HIVE = winreg.HKEY_LOCAL_MACHINE\n" + _REGISTRY_WALK
    walked: dict[str, dict[str, Any]] = json.loads(run_code(code, timeout=300))
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


HIVES = {"HKCU": "HKEY_CURRENT_USER", "HKLM": "HKEY_LOCAL_MACHINE"}


def read_key(path: str, hive: str = "HKCU") -> str | None:
    """The default value of `hive\\path` (HKLM: its 64-bit view), or None when the key is
    not there."""
    script = (
        "import json, winreg\n"
        "try:\n"
        f"    print(json.dumps(winreg.QueryValue(winreg.{HIVES[hive]}, {path!r})))\n"
        "except FileNotFoundError:\n"
        "    print('null')\n"
    )
    value: str | None = json.loads(run_code(script))  # JSON: ASCII whatever the code page
    return value


def write_key(path: str, value: str | None, hive: str = "HKCU") -> None:
    """Set (or, with None, delete) the default value of `hive\\path`."""
    script = (
        "import winreg\n"
        f"path, value = {path!r}, {value!r}\n"
        "if value is None:\n"
        "    try:\n"
        f"        winreg.DeleteKey(winreg.{HIVES[hive]}, path)\n"
        "    except FileNotFoundError:\n"
        "        pass\n"
        "else:\n"
        f"    winreg.SetValue(winreg.{HIVES[hive]}, path, winreg.REG_SZ, value)\n"
    )
    run_code(script)


def set_user_level_hosts(allowed: bool | None) -> None:
    """Chrome's machine policy `NativeMessagingUserLevelHosts` (a DWORD in
    HKLM\\SOFTWARE\\Policies\\Google\\Chrome, as Group Policy or Intune writes it):
    True/False sets it to 1/0, None removes it (and the key when nothing else is in it)."""
    script = f"""
import winreg
allowed = {allowed!r}
if allowed is None:
    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, {POLICY_KEY!r}, 0,
                            winreg.KEY_ALL_ACCESS) as key:
            winreg.DeleteValue(key, {USER_LEVEL_HOSTS!r})
        winreg.DeleteKey(winreg.HKEY_LOCAL_MACHINE, {POLICY_KEY!r})
    except OSError:
        pass
else:
    with winreg.CreateKey(winreg.HKEY_LOCAL_MACHINE, {POLICY_KEY!r}) as key:
        winreg.SetValueEx(key, {USER_LEVEL_HOSTS!r}, 0, winreg.REG_DWORD, int(allowed))
"""
    run_code(script)


def newer_msi(scope: str = PER_USER) -> Path:
    """The `scope` MSI in NEWER_DIST of this tree's version plus one, its internals
    different (tests/support/variant.py), built (both MSIs) when it is not there."""
    wanted = package_scope(scope).msi_name.format(version=newer_version())
    if not (NEWER_DIST / wanted).is_file():
        build_newer_msi()
    return NEWER_DIST / wanted


def build_newer_msi() -> Path:
    """This tree with its version raised by one and its internals changed
    (tests/support/variant.py), built by packaging/windows/build.py into NEWER_DIST."""
    import shutil

    shutil.rmtree(NEWER_DIST, ignore_errors=True)
    build_newer("msi", NEWER_DIST, REPO / "build" / "windows-build-newer")
    msi = NEWER_DIST / package_scope(PER_USER).msi_name.format(version=newer_version())
    assert msi.is_file(), f"no {msi.name} in {NEWER_DIST}"
    return msi


if __name__ == "__main__":
    print(build_newer_msi())
