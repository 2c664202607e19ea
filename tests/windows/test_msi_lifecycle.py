"""On the Windows lane: the MSI's whole life in the prefix, as a user lives it. Installed
(nothing asked), upgraded in place by a build with a higher version (one product, the newer
files only, the same registration), refused when older, removed leaving nothing but
Windows Installer's own bookkeeping; refused, leaving nothing, into a folder others can
write; Pedelec Desktop's registration taken over at install and given back at uninstall
(docs/install.md, "The Windows MSI"); installed into a profile folder whose name holds an
apostrophe and a letter outside ASCII.

Each test installs and removes what it needs; none runs while test_msi.py's install is in
place (module fixtures end with their module).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import HOST_NAME, __version__
from native_host.errors import STAGE_READ_LAUNCH_CONFIG
from native_host.install import locations
from tests.support.msi import (
    EXECUTABLE,
    MANIFEST,
    built_msi,
    drive_c_files,
    hkcu_software,
    install,
    install_dir,
    installed_apps_entries,
    left_behind,
    msiexec,
    newer_version,
    products,
    read_key,
    uninstall,
    version_dir,
    write_key,
)
from tests.support.msi import newer_msi as msi_newer
from tests.support.packaging_scripts import windows_module
from tests.support.wine import (
    LANE,
    folder_everyone_writes,
    linux_path,
    windows_path,
    wine_environment,
)
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

msi_document = windows_module("msi_document")
ODD_USER = "O'Brien Jos\u00e9"


@pytest.fixture(scope="module")
def newer_msi(lane: None) -> Path:
    """The same tree with a higher version (tests/support/msi.py, `newer_msi`): .ci/run
    builds it before the lane's network-less step; built here when it is not there."""
    return msi_newer()


@pytest.fixture
def clean_prefix(lane: None) -> Iterator[None]:
    """The prefix holds no Pedelec MSI before the test, and none after it."""
    assert products() == [], "the lane's prefix already holds a Pedelec MSI"
    try:
        yield
    finally:
        for product in products():
            subprocess.run(
                ["wine", "msiexec", "/x", product["product"], "/qn"],
                capture_output=True, stdin=subprocess.PIPE, env=wine_environment(),
                timeout=300, check=False,
            )  # fmt: skip


def installed_files(folder: str) -> set[str]:
    root = linux_path(folder)
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def bundle_files(msi: Path) -> set[str]:
    """What the package installs: its version's bundle in a folder of its own, and
    `current` (packaging/windows/build.py, `msi_root`)."""
    root = msi.parent / "pedelec-native-host-msi"
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def version_of(executable: str) -> str:
    done = subprocess.run(
        ["wine", str(linux_path(executable)), "version"],
        input=b"", capture_output=True, env=wine_environment(), timeout=120, check=False,
    )  # fmt: skip
    return done.stdout.decode().strip()


def host_keys() -> list[str]:
    home = locations.home_from_env({"USERPROFILE": "C:\\Users\\user"}, "win32")
    targets = locations.targets("win32", {}, home, locations.Scope.USER)
    return sorted({t.registry_key.path for t in targets if t.registry_key is not None})


def chrome_key() -> str:
    (row,) = locations.select_rows("win32", ["chrome"])
    assert row.registry_vendor is not None
    return locations.registry_key_path(row.registry_vendor)


def registry_changes(
    before: dict[str, dict[str, object]], after: dict[str, dict[str, object]]
) -> list[str]:
    """Keys added, removed or changed under HKCU\\Software, but Windows Installer's own and
    Wine's (the system parameters its user32 keeps for a session, written once the
    shortcut's shell code has run)."""
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    own = ("Software\\Microsoft\\Installer", "Software\\Wine\\")
    return sorted(k for k in changed if not k.startswith(own))


def test_install_upgrade_and_uninstall_leave_nothing_behind(
    clean_prefix: None, newer_msi: Path, windows_profile: str
) -> None:
    older = built_msi()
    folder = install_dir(windows_profile)
    files, registry = drive_c_files(), hkcu_software()

    done = install(older)
    assert done.returncode == 0, done.stderr
    assert [p["version"] for p in products()] == [__version__]
    assert installed_files(folder) == bundle_files(older)
    assert (
        version_of(f"{version_dir(folder)}\\{EXECUTABLE}") == f"pedelec-native-host {__version__}"
    )

    done = install(newer_msi)
    assert done.returncode == 0, done.stderr
    newer = newer_version(__version__)
    assert [p["version"] for p in products()] == [newer], "one product, the newer"
    # The older version's folder is permanent (its hosts could be running): with none
    # running, the newer package's `tidy` removed it (tests/windows/test_msi_live_upgrade.py
    # upgrades under live hosts).
    assert installed_files(folder) == bundle_files(newer_msi), "the newer files, and only they"
    executable = f"{version_dir(folder, newer)}\\{EXECUTABLE}"
    assert version_of(executable) == f"pedelec-native-host {newer}"
    assert not any(f"-{__version__}.dist-info" in name for name in installed_files(folder))
    for key in host_keys():
        assert read_key(key) == f"{version_dir(folder, newer)}\\{MANIFEST}", key

    done = uninstall(newer_msi)
    assert done.returncode == 0, done.stderr
    assert products() == []
    assert left_behind(files, drive_c_files()) == []
    assert registry_changes(registry, hkcu_software()) == []


def test_an_install_folder_others_can_write_is_refused_leaving_nothing(
    clean_prefix: None, tmp_path: Path
) -> None:
    """`INSTALLDIR=` a folder inside one Everyone may write (on Windows, any folder made
    under `C:\\` inherits "Authenticated Users: Modify"): once the files are in, the
    package runs the installed executable's own check (`--check-folder`, the rule of its
    every start; msi_document.folder_check), which fails the install, and Windows
    Installer's rollback leaves no file, no key and no entry in Installed apps. The
    default folder, the user's own, still installs."""
    msi = built_msi()
    shared = folder_everyone_writes()
    log = tmp_path / "install.log"
    try:
        files, registry = drive_c_files(), hkcu_software()
        refused = msiexec(
            "/i", windows_path(msi), f"INSTALLDIR={shared}\\pedelec-native-host",
            "/l*v", windows_path(log),
        )  # fmt: skip
        # ERROR_INSTALL_FAILURE (1603) on Windows, ERROR_FUNCTION_FAILED (1627) from
        # Wine 8's msiexec; a Linux exit status keeps their low 8 bits.
        assert refused.returncode in (1603 & 0xFF, 1627 & 0xFF), refused
        assert products() == [] and installed_apps_entries() == []
        assert left_behind(files, drive_c_files()) == []
        assert not linux_path(shared).joinpath("pedelec-native-host").exists()
        assert registry_changes(registry, hkcu_software()) == []
        # Why: the install's log names the action that failed (Wine's msiexec logs a
        # failed action's "Return value" as 0, Windows as 3), and Wine passes the
        # action's stderr through: the executable's own line, naming the folder.
        ended = rf"Action ended [0-9:]+: {msi_document.FOLDER_CHECK}\. Return value 0\."
        assert re.search(ended, log.read_text(errors="replace")), ended
        line = refused.stderr.decode(errors="replace").strip()
        assert shared in line and "writable by other users" in line, line
    finally:
        shutil.rmtree(linux_path(shared), ignore_errors=True)

    assert install(msi).returncode == 0
    assert [p["version"] for p in products()] == [__version__]
    assert uninstall(msi).returncode == 0


def test_an_older_package_refuses_to_replace_a_newer_one(
    clean_prefix: None, newer_msi: Path
) -> None:
    assert install(newer_msi).returncode == 0
    refused = install(built_msi())
    assert refused.returncode != 0, "an older package must not downgrade a newer one"
    assert [p["version"] for p in products()] == [newer_version(__version__)]
    assert uninstall(newer_msi).returncode == 0


@pytest.fixture
def desktop_manifest(windows_profile: str) -> Iterator[str]:
    """Pedelec Desktop's own manifest in %USERPROFILE%\\.pedelec (spec 5.1), and its
    registration in the Chrome key; both removed afterwards."""
    found = locations.desktop_manifest_path("win32", locations.home_from_env(
        {"USERPROFILE": windows_profile}, "win32"))  # fmt: skip
    assert found is not None
    manifest = linux_path(str(found))
    manifest.parent.mkdir(exist_ok=True)
    manifest.write_text(json.dumps({"name": HOST_NAME, "path": "pedelec-native-host.exe"}))
    write_key(chrome_key(), str(found))
    try:
        yield str(found)
    finally:
        write_key(chrome_key(), None)
        shutil.rmtree(manifest.parent)


@pytest.mark.parametrize("desktop_started_meanwhile", [False, True])
def test_the_desktops_registration_is_taken_over_then_given_back(
    clean_prefix: None,
    desktop_manifest: str,
    windows_profile: str,
    desktop_started_meanwhile: bool,
) -> None:
    msi = built_msi()
    assert install(msi).returncode == 0
    ours = f"{version_dir(install_dir(windows_profile))}\\{MANIFEST}"
    assert read_key(chrome_key()) == ours, "the MSI takes the key over, as `install` does"
    if desktop_started_meanwhile:  # a foreground start of the Desktop takes it back
        write_key(chrome_key(), desktop_manifest)
    assert uninstall(msi).returncode == 0
    assert read_key(chrome_key()) == desktop_manifest
    for key in host_keys():
        if key != chrome_key():
            assert read_key(key) is None, key


def test_installed_into_a_folder_with_an_apostrophe_and_an_accent_the_host_answers(
    clean_prefix: None, wine_world: WineWorld, newer_msi: Path, windows_profile: str
) -> None:
    """`INSTALLDIR=` a folder as odd as a profile's can be; the upgrade (given no folder)
    and the removal find it again (msi_document.REMEMBERED_FOLDER)."""
    folder = f"C:\\users\\{ODD_USER}\\AppData\\Local\\Programs\\pedelec-native-host"
    try:
        assert install(built_msi(), INSTALLDIR=folder).returncode == 0
        for key in host_keys():
            assert (read_key(key) or "").lower() == f"{version_dir(folder)}\\{MANIFEST}".lower()
        host = wine_world.start_as_chrome(registry_name=HOST_NAME)
        response = host.request({"type": "ping", "requestId": "odd"}, timeout=60)
        # No Core and no app-launch.json here: the staged answer proves the host ran.
        assert response["error"]["details"]["stage"] == STAGE_READ_LAUNCH_CONFIG, response
        host.close_stdin()
        assert host.wait(60) == 0
        log = "".join(p.read_text() for p in (wine_world.root / "logs").glob("*.log*"))
        assert "image=loaded" in log, log
        assert install(newer_msi).returncode == 0
        assert installed_files(folder) == bundle_files(newer_msi)
        assert not linux_path(install_dir(windows_profile)).exists()
    finally:
        wine_world.close()
        for product in products():
            package = newer_msi if product["version"] != __version__ else built_msi()
            assert uninstall(package).returncode == 0
    assert products() == []
    assert not linux_path(folder).exists()
    shutil.rmtree(LANE.drive_c / "users" / ODD_USER, ignore_errors=True)
