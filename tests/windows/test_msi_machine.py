"""On the Windows lane: the per-machine MSI an administrator deploys for browsers whose
policy refuses per-user hosts (docs/install.md, "For administrators"). What the package
says of itself (read from its tables: Wine runs every install elevated, so "needs an
administrator" rests on its flags and launch condition); installed into Program Files
and registered in HKLM for every browser of the locations table, where Chrome with
NativeMessagingUserLevelHosts 0 finds and starts it (chrome_start.py honours the policy
as Chromium does) and `doctor` says so; the per-user MSI alone, under that policy,
passed over by Chrome and reported by `doctor` naming the per-machine one; both installed
at once, each upgraded and removed on its own; the per-machine one upgraded in place and
removed leaving nothing, and refused, leaving nothing, into a folder others can write.

tests/windows/as_installed_msi.py plays the golden suite through it
(`PEDELEC_TEST_MSI_SCOPE=per-machine`, .ci/run's Windows steps).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path, PureWindowsPath

import pytest

from native_host import HOST_NAME, __version__
from native_host.install import locations
from native_host.install.locations import Scope
from tests.support.msi import (
    EXECUTABLE,
    MACHINE_INSTALL_DIR,
    MANIFEST,
    PER_MACHINE,
    PER_USER,
    built_msi,
    drive_c_files,
    hkcu_software,
    hklm_software,
    install,
    install_dir,
    left_behind,
    newer_msi,
    newer_version,
    package_scope,
    products,
    read_key,
    set_user_level_hosts,
    uninstall,
    version_dir,
)
from tests.support.wine import (
    DRIVER,
    folder_everyone_writes,
    linux_path,
    run_python,
    windows_path,
    wine_environment,
)
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

NO_ELEVATION = 8
"""PID_WORDCOUNT bit 3: "elevated privileges are not required"."""
COMPRESSED = 2
HKLM_ROOT = "2"
"""The Registry and RegLocator tables' number for HKEY_LOCAL_MACHINE."""
COMPONENT_64_BIT = 256
INSTALLER_OWN = (
    "Software\\Microsoft\\Windows\\CurrentVersion\\Installer",
    "Software\\Classes\\Installer",
    "Software\\Microsoft\\Installer",
    "Software\\Wine\\",
)
"""Windows Installer's own bookkeeping (HKLM's, and HKCU's as test_msi_lifecycle.py
has it), emptied but kept after a removal, and Wine's (the system parameters its user32
keeps for a session, once the Start-menu shortcut's shell code has run)."""


def msi_table(msi: Path, name: str) -> list[list[str]]:
    done = subprocess.run(
        ["msiinfo", "export", str(msi), name], capture_output=True, text=True, check=True
    )
    return [line.split("\t") for line in done.stdout.splitlines()[3:]]


def machine_keys() -> list[str]:
    """Every key `install --scope system` writes on Windows (HKLM), from the table."""
    home = PureWindowsPath("C:/Users/user")
    targets = locations.targets("win32", {}, home, Scope.SYSTEM)
    keys = {t.registry_key.path for t in targets if t.registry_key is not None}
    assert {t.registry_key.hive for t in targets if t.registry_key is not None} == {"HKLM"}
    return sorted(keys)


def chrome_key() -> str:
    (row,) = locations.select_rows("win32", ["chrome"])
    assert row.registry_vendor is not None
    return locations.registry_key_path(row.registry_vendor)


def installed_files(folder: str) -> set[str]:
    root = linux_path(folder)
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def bundle_files(msi: Path) -> set[str]:
    root = msi.parent / "pedelec-native-host-msi"
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def run_exe(executable: str, *args: str, env: dict[str, str] | None = None) -> dict[str, dict]:
    """`<executable> doctor --json ...`: its findings by (subject, check)."""
    done = subprocess.run(
        ["wine", str(linux_path(executable)), *args],
        input=b"", capture_output=True, env=wine_environment(env), timeout=300, check=False,
    )  # fmt: skip
    assert b"Traceback" not in done.stdout + done.stderr, done.stderr
    return {(f["subject"], f["check"]): f for f in json.loads(done.stdout)["findings"]}


def doctor(executable: str, world: WineWorld, *browsers: str) -> dict[tuple[str, str], dict]:
    return run_exe(executable, "doctor", "--json", "--browser", *browsers, env=world.env)


def chrome_finds() -> subprocess.CompletedProcess[bytes]:
    """chrome_start.py's lookup alone: the manifest it would load, or Chrome's error."""
    code = (
        "import runpy, sys; sys.argv = ['chrome_start']; "
        f"m = runpy.run_path({windows_path(DRIVER)!r}); "
        f"print(m['manifest_from_registry']({HOST_NAME!r}))"
    )
    return run_python(["-c", code])


@pytest.fixture
def clean_prefix(lane: None) -> Iterator[None]:
    """No Pedelec MSI and no Chrome policy before the test, and none after it."""
    assert products(PER_USER) == products(PER_MACHINE) == [], "the prefix holds a Pedelec MSI"
    try:
        yield
    finally:
        set_user_level_hosts(None)
        for scope in (PER_USER, PER_MACHINE):
            for product in products(scope):
                subprocess.run(
                    ["wine", "msiexec", "/x", product["product"], "/qn"],
                    capture_output=True, stdin=subprocess.PIPE, env=wine_environment(),
                    timeout=300, check=False,
                )  # fmt: skip


def test_the_package_says_it_needs_an_administrator_and_is_per_machine(lane: None) -> None:
    machine, user = built_msi(PER_MACHINE), built_msi(PER_USER)
    done = subprocess.run(
        ["msiinfo", "suminfo", str(machine)], capture_output=True, text=True, check=True
    )
    (words,) = re.findall(r"^Source: (\d+)", done.stdout, flags=re.M)  # PID_WORDCOUNT
    assert int(words) & COMPRESSED and not int(words) & NO_ELEVATION, done.stdout
    properties = dict(row[:2] for row in msi_table(machine, "Property"))
    assert properties["ALLUSERS"] == "1"
    assert properties["UpgradeCode"].strip("{}").lower() == package_scope(PER_MACHINE).upgrade_code
    user_code = dict(row[:2] for row in msi_table(user, "Property"))["UpgradeCode"]
    assert user_code != properties["UpgradeCode"], "the two packages must coexist"
    conditions = dict(row[:2] for row in msi_table(machine, "LaunchCondition"))
    assert "as an administrator" in conditions["Privileged"]
    # The same files as the per-user package, in Program Files.
    shipped = {row[2].split("|")[-1] for row in msi_table(machine, "File")}
    assert shipped == {row[2].split("|")[-1] for row in msi_table(user, "File")}
    directories = {row[0]: row for row in msi_table(machine, "Directory")}
    assert directories["INSTALLDIR"][1] == "ProgramFiles64Folder"


def test_every_component_is_64_bit_and_keyed_in_hklm(lane: None) -> None:
    """Nothing of a per-machine package may live in one user's HKCU: its key paths, the
    host's keys and the remembered folder are HKLM values, in the 64-bit view."""
    machine = built_msi(PER_MACHINE)
    registry = {row[0]: row for row in msi_table(machine, "Registry")}
    assert {row[1] for row in registry.values()} == {HKLM_ROOT}
    for component, _guid, _folder, attributes, _condition, key_path in msi_table(
        machine, "Component"
    ):
        assert key_path in registry, f"{component} is keyed on {key_path!r}, not a value"
        assert int(attributes) & COMPONENT_64_BIT, component
    # The remembered folder, and the mark of an upgrade under way (issue 30).
    locators = msi_table(machine, "RegLocator")
    assert len(locators) == 2
    for locator in locators:
        assert locator[1] == HKLM_ROOT and int(locator[4]) & 16, locator  # msidbLocatorType64bit
    user_guids = {row[1] for row in msi_table(built_msi(PER_USER), "Component")}
    assert user_guids.isdisjoint(row[1] for row in msi_table(machine, "Component"))


def test_installed_for_every_user_chrome_under_policy_finds_it_and_doctor_says_ok(
    clean_prefix: None, wine_world: WineWorld
) -> None:
    msi = built_msi(PER_MACHINE)
    done = install(msi)
    assert done.returncode == 0, done.stderr
    assert [p["version"] for p in products(PER_MACHINE)] == [__version__]
    assert products(PER_USER) == []
    assert installed_files(MACHINE_INSTALL_DIR) == bundle_files(msi)
    manifest = f"{version_dir(MACHINE_INSTALL_DIR)}\\{MANIFEST}"
    for key in machine_keys():
        assert read_key(key, "HKLM") == manifest, key
        assert read_key(key, "HKCU") is None, key

    set_user_level_hosts(False)
    assert chrome_finds().stdout.decode().strip() == manifest
    wine_world.start_core()
    wine_world.write_config({"checkRuntimePid": False})
    host = wine_world.start_as_chrome(registry_name=HOST_NAME)
    assert host.request({"type": "ping", "requestId": "machine"}, timeout=60)["ok"] is True
    host.close_stdin()
    assert host.wait(60) == 0

    executable = f"{version_dir(MACHINE_INSTALL_DIR)}\\{EXECUTABLE}"
    found = doctor(executable, wine_world, "chrome", "edge")
    policy = found[("chrome", "managed policy")]
    assert policy["status"] == "ok" and "NativeMessagingUserLevelHosts is false" in policy["detail"]
    for browser in ("chrome", "edge"):
        present = found[(browser, "manifest present")]
        assert present["status"] == "ok", present
        assert present["detail"].startswith("HKLM\\"), present
        assert f"-> {manifest} (per-machine: the one {browser} loads" in present["detail"]
        registered = found[(browser, "host registered")]
        assert registered["detail"] == f"this host ({executable}, which runs this doctor)"
        assert found[(browser, "host answers ping")]["status"] == "ok"
    assert uninstall(msi).returncode == 0


def test_the_per_user_msi_alone_is_passed_over_under_the_policy_and_doctor_says_why(
    clean_prefix: None, wine_world: WineWorld, windows_profile: str
) -> None:
    msi = built_msi(PER_USER)
    assert install(msi).returncode == 0
    set_user_level_hosts(False)
    looked = chrome_finds()
    assert looked.returncode != 0
    assert f"Native messaging host {HOST_NAME} is not registered." in looked.stderr.decode()
    executable = f"{version_dir(install_dir(windows_profile))}\\{EXECUTABLE}"
    found = doctor(executable, wine_world, "chrome")
    policy = found[("chrome", "managed policy")]
    assert policy["status"] == "fail", policy
    machine_msi = f"msiexec /i pedelec-native-host-{__version__}-x64-machine.msi /qn"
    assert machine_msi in policy["hint"]
    present = found[("chrome", "manifest present")]
    assert present["status"] == "fail"
    assert f"user-level manifests ignored by policy: HKCU\\{chrome_key()}" in present["detail"]
    set_user_level_hosts(None)  # without the policy Chrome loads it again
    assert (
        chrome_finds().stdout.decode().strip()
        == f"{version_dir(install_dir(windows_profile))}\\{MANIFEST}"
    )
    assert uninstall(msi).returncode == 0


def test_both_packages_of_one_version_coexist_and_the_policy_picks_the_per_machine_one(
    clean_prefix: None, wine_world: WineWorld, windows_profile: str
) -> None:
    user, machine = built_msi(PER_USER), built_msi(PER_MACHINE)
    assert install(user).returncode == 0
    assert install(machine).returncode == 0
    assert [p["version"] for p in products(PER_USER)] == [__version__]
    assert [p["version"] for p in products(PER_MACHINE)] == [__version__]
    user_folder = install_dir(windows_profile)
    user_exe = f"{version_dir(user_folder)}\\{EXECUTABLE}"
    machine_exe = f"{version_dir(MACHINE_INSTALL_DIR)}\\{EXECUTABLE}"

    # Without the policy Chrome reads HKCU first: the per-user one.
    assert chrome_finds().stdout.decode().strip() == f"{version_dir(user_folder)}\\{MANIFEST}"
    found = doctor(machine_exe, wine_world, "chrome")
    assert found[("chrome", "host registered")]["detail"] == f"the per-user MSI's host ({user_exe})"
    assert "shadows HKLM" in found[("chrome", "manifest present")]["detail"]
    # With it, HKLM alone: the per-machine one.
    set_user_level_hosts(False)
    assert (
        chrome_finds().stdout.decode().strip() == f"{version_dir(MACHINE_INSTALL_DIR)}\\{MANIFEST}"
    )
    found = doctor(user_exe, wine_world, "chrome")
    registered = found[("chrome", "host registered")]
    assert registered["detail"] == f"the per-machine MSI's host ({machine_exe})"
    assert found[("chrome", "host answers ping")]["status"] == "ok"

    # Each is removed on its own: the other keeps its files and its keys.
    assert uninstall(user).returncode == 0
    assert products(PER_USER) == [] and len(products(PER_MACHINE)) == 1
    assert not linux_path(user_folder).exists()
    assert installed_files(MACHINE_INSTALL_DIR) == bundle_files(machine)
    assert read_key(chrome_key(), "HKLM") == f"{version_dir(MACHINE_INSTALL_DIR)}\\{MANIFEST}"
    assert uninstall(machine).returncode == 0


def test_upgraded_in_place_then_removed_leaving_nothing(clean_prefix: None) -> None:
    older, newer = built_msi(PER_MACHINE), newer_msi(PER_MACHINE)
    files, machine_registry, user_registry = drive_c_files(), hklm_software(), hkcu_software()

    assert install(older).returncode == 0
    assert install(newer).returncode == 0
    assert [p["version"] for p in products(PER_MACHINE)] == [newer_version(__version__)]
    assert installed_files(MACHINE_INSTALL_DIR) == bundle_files(newer)
    # No host of the older version runs: the upgrade removed its folder (`tidy`).
    folder = version_dir(MACHINE_INSTALL_DIR, newer_version())
    for key in machine_keys():
        assert read_key(key, "HKLM") == f"{folder}\\{MANIFEST}", key
    refused = install(older)
    assert refused.returncode != 0, "an older package must not downgrade a newer one"

    assert uninstall(newer).returncode == 0
    assert products(PER_MACHINE) == []
    assert left_behind(files, drive_c_files()) == []
    assert changed(machine_registry, hklm_software()) == []
    assert changed(user_registry, hkcu_software()) == []


def test_an_install_folder_others_can_write_is_refused_leaving_nothing(
    clean_prefix: None,
) -> None:
    """As the per-user package does (test_msi_lifecycle.py): `INSTALLDIR=` inside a folder
    Everyone may write fails the install once the files are in (the installed
    executable's `--check-folder`, run as the installing administrator), and the rollback
    leaves no file and no key in either hive."""
    shared = folder_everyone_writes()
    try:
        files, machine_registry, user_registry = drive_c_files(), hklm_software(), hkcu_software()
        refused = install(built_msi(PER_MACHINE), INSTALLDIR=f"{shared}\\pedelec-native-host")
        # 1603 on Windows, 1627 from Wine 8's msiexec; a Linux exit status keeps 8 bits.
        assert refused.returncode in (1603 & 0xFF, 1627 & 0xFF), refused
        assert products(PER_MACHINE) == []
        assert left_behind(files, drive_c_files()) == []
        assert changed(machine_registry, hklm_software()) == []
        assert changed(user_registry, hkcu_software()) == []
        line = refused.stderr.decode(errors="replace").strip()
        assert shared in line and "writable by other users" in line, line
    finally:
        shutil.rmtree(linux_path(shared), ignore_errors=True)


def changed(before: dict[str, dict[str, object]], after: dict[str, dict[str, object]]) -> list[str]:
    """Keys added, removed or changed, but Windows Installer's own bookkeeping."""
    keys = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return sorted(k for k in keys if not k.startswith(INSTALLER_OWN))
