"""The per-user MSI's WiX source (packaging/windows/msi_document.py), read back as XML:
what Windows Installer will do with it, on any system. The Windows lane builds it with
wixl and installs, upgrades and removes it for real (tests/windows/test_msi*.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

from tests.support.packaging_scripts import windows_module

pytestmark = pytest.mark.unit

msi_document = windows_module("msi_document")
build = windows_module("build")
WIX = "{http://schemas.microsoft.com/wix/2006/wi}"
BUNDLE = [
    "pedelec-native-host.exe",
    "cc.isaaclin.pedelec.json",
    "site-packages/native_host/relay.py",
    "site-packages/native_host/core/peer/windows.py",
    "site-packages/pydantic/_internal/" + "x" * 90 + ".py",
]


def installed(version: str = "1.2.3") -> list[str]:
    """What the package installs: the bundle in its version's folder, and `current`."""
    return ["current", *(f"{version}/{name}" for name in BUNDLE)]


FILES = installed()


def product_at(version: str) -> Any:
    """The package's product at `version` (a `msi_document.Product`): its bundle in the
    version's folder."""
    return msi_document.Product(
        version,
        f"{version}/cc.isaaclin.pedelec.json",
        f"{version}/pedelec-native-host.exe",
        version,
    )


def parsed(
    compiler: str = "wixl", files: list[str] | None = None, version: str = "1.2.3"
) -> ElementTree.Element:
    text = msi_document.document(
        product_at(version), files or installed(version), "pedelec-native-host-msi",
        build.host_keys(), build.desktop_registration(), compiler,
    )  # fmt: skip
    return ElementTree.fromstring(text)


def elements(root: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return list(root.iter(WIX + name))


def test_every_folder_is_one_component_keyed_on_an_hkcu_value_that_removes_it() -> None:
    root = parsed()
    folders = {d.get("Name") for d in elements(root, "Directory")}
    assert {"pedelec-native-host", "site-packages", "native_host", "core", "peer"} <= folders
    for component in elements(root, "Component"):
        keys = [v for v in component.iter(WIX + "RegistryValue") if v.get("KeyPath") == "yes"]
        assert len(keys) == 1 and keys[0].get("Root") == "HKCU", component.get("Id")
        assert not [f for f in component.iter(WIX + "File") if f.get("KeyPath") == "yes"]
    removing = [c for c in elements(root, "Component") if c.find(WIX + "RemoveFolder") is not None]
    # One per folder of the bundle, one for the per-user Programs folder, and the Start
    # menu's (each removed only when empty).
    assert len(removing) == len(msi_document.folders(FILES)) + 2
    files = [f.get("Source") for f in elements(root, "File")]
    assert sorted(files) == sorted(f"pedelec-native-host-msi/{name}" for name in FILES)


def test_identifiers_are_unique_in_each_table_and_fit_its_column() -> None:
    root = parsed()
    for table in ("Directory", "Component", "File", "RemoveFolder", "CustomAction"):
        ids = [e.get("Id", "") for e in elements(root, table)]
        assert len(ids) == len(set(ids)), table
        assert all(0 < len(i) <= 72 for i in ids), max(ids, key=len)


def test_each_version_has_its_own_components_and_shares_the_others() -> None:
    """The install folder's own component and the keys' are the same in every version (the
    same GUID); a version folder's are that version's alone (another folder, other
    files), and permanent: a newer package never removes them (issue 30)."""
    first = {c.get("Id"): c.get("Guid") for c in elements(parsed(), "Component")}
    later = {c.get("Id"): c.get("Guid") for c in elements(parsed(version="1.2.4"), "Component")}
    shared = first.keys() & later.keys()
    assert {"Bundle", "UserProgramsFolder"} <= shared
    assert all(first[c] == later[c] for c in shared)
    assert all(not c.startswith("c_1.2.") for c in shared)
    assert len(set(first.values())) == len(first)
    assert len(set(first.values()) | set(later.values())) == len(first.keys() | later.keys())


@pytest.mark.parametrize("compiler", ["wixl", "wix3"])
def test_the_versions_folder_is_permanent_and_nothing_else(compiler: str) -> None:
    components = {c.get("Id"): c for c in elements(parsed(compiler), "Component")}
    permanent = msi_document.permanent_components(product_at("1.2.3"), FILES)
    assert sorted(permanent) == sorted(c for c in components if c.startswith("c_1.2.3"))
    assert "Bundle" not in permanent and len(permanent) == 7  # its 7 folders
    marked = {c for c, e in components.items() if e.get("Permanent") == "yes"}
    # WiX 3 takes the attribute; wixl does not, and build.py sets the bit in its output.
    assert marked == (set(permanent) if compiler == "wix3" else set())


def test_restart_manager_never_closes_a_host_and_uninstalling_removes_every_version() -> None:
    root = parsed()
    properties = {p.get("Id"): p.get("Value") for p in elements(root, "Property")}
    assert properties["MSIRESTARTMANAGERCONTROL"] == "Disable"
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    removal = actions["RemoveVersions"]
    assert removal.get("Execute") == "deferred" and removal.get("Return") == "ignore"
    assert removal.get("ExeCommand") == msi_document.versions_removal_command(
        "[INSTALLDIR]", msi_document.PER_USER
    )
    assert 'rmdir /s /q "[INSTALLDIR]"' in removal.get("ExeCommand", "")
    scheduled = {c.get("Action"): c for c in elements(root, "Custom")}
    for name in ("SetRemovalShell", "RemoveVersions"):
        assert scheduled[name].text == msi_document.FINAL_REMOVAL
    assert "NOT PEDELEC_UPGRADING" in msi_document.FINAL_REMOVAL
    # After RemoveFiles (3500), before InstallFinalize (6600): inside the script.
    sequence = [
        int(scheduled[n].get("Sequence", "0")) for n in ("SetRemovalShell", "RemoveVersions")
    ]
    assert 3500 < sequence[0] < sequence[1] < 6600


def test_the_keys_of_the_locations_table_name_the_manifest_beside_the_executable() -> None:
    values = [
        v for v in elements(parsed(), "RegistryValue")
        if v.get("Key", "").endswith("\\NativeMessagingHosts\\cc.isaaclin.pedelec")
    ]  # fmt: skip
    keys = {v.get("Key") for v in values}
    assert keys == {
        "Software\\Google\\Chrome\\NativeMessagingHosts\\cc.isaaclin.pedelec",
        "Software\\Chromium\\NativeMessagingHosts\\cc.isaaclin.pedelec",
        "Software\\Microsoft\\Edge\\NativeMessagingHosts\\cc.isaaclin.pedelec",
    }
    assert {v.get("Value") for v in values} == {"[INSTALLDIR]1.2.3\\cc.isaaclin.pedelec.json"}
    assert all(v.get("Root") == "HKCU" and v.get("Name") is None for v in values)


def test_the_install_folder_is_remembered_and_found_again() -> None:
    root = parsed()
    (search,) = [
        s for s in elements(root, "RegistrySearch") if s.get("Id") == "RememberedInstallDir"
    ]
    remembered = [v for v in elements(root, "RegistryValue")
                  if v.get("Name") == msi_document.REMEMBERED_FOLDER]  # fmt: skip
    assert len(remembered) == 1 and remembered[0].get("Value") == "[INSTALLDIR]"
    assert (search.get("Key"), search.get("Name")) == (
        remembered[0].get("Key"), remembered[0].get("Name"))  # fmt: skip


@pytest.mark.parametrize("compiler", ["wixl", "wix3"])
def test_an_upgrade_is_marked_then_the_older_package_removed_before_the_newer_installs(
    compiler: str,
) -> None:
    """The older package's removal must not take the install folder or the Desktop's key
    with it: Wine's msiexec does not tell it `UPGRADINGPRODUCTCODE`, so the newer package
    marks the upgrade in its key first (an immediate action: before the older one goes),
    and takes the mark away in its script."""
    root = parsed(compiler)
    upgrade = root.find(f"{WIX}Product/{WIX}MajorUpgrade")
    assert upgrade is not None
    assert upgrade.get("Schedule") == {"wixl": None, "wix3": "afterInstallInitialize"}[compiler]
    rows = [int(e.get("Sequence", "0")) for e in elements(root, "RemoveExistingProducts")]
    assert rows == {"wixl": [1403], "wix3": []}[compiler]
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    mark, unmark = msi_document.upgrade_mark_commands(msi_document.PER_USER)
    assert actions["MarkUpgrade"].get("ExeCommand") == mark
    assert actions["MarkUpgrade"].get("Execute") == "immediate"
    assert actions["UnmarkUpgrade"].get("ExeCommand") == unmark
    assert actions["UnmarkUpgrade"].get("Execute") == "deferred"
    reg = f'"{msi_document.REG}"'
    key = f'"HKCU\\{msi_document.COMPONENTS_KEY}"'
    assert f"{reg} add {key} /v Upgrading" in mark and f"{reg} delete {key}" in unmark
    scheduled = {c.get("Action"): c for c in elements(root, "Custom")}
    for name in ("SetMarkShell", "MarkUpgrade", "SetUnmarkShell", "UnmarkUpgrade"):
        assert scheduled[name].text == "WIX_UPGRADE_DETECTED"
    at = {name: int(scheduled[name].get("Sequence", "0")) for name in scheduled}
    # After InstallValidate (1400), before the removal (1403 for wixl; WiX 3 puts it after
    # InstallInitialize, 1500); the unmark after WriteRegistryValues (5000).
    assert 1400 < at["SetMarkShell"] < at["MarkUpgrade"] < 1403
    assert 5000 < at["SetUnmarkShell"] < at["UnmarkUpgrade"] < 6600
    searched = {s.get("Name") for s in elements(root, "RegistrySearch")}
    assert msi_document.UPGRADING in searched
    assert msi_document.FINAL_REMOVAL.endswith("AND NOT PEDELEC_UPGRADING")


def test_the_desktops_key_is_given_back_at_uninstall_only_and_inside_the_script() -> None:
    root = parsed()
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    restore = actions["RestoreDesktopRegistration"]
    assert restore.get("Execute") == "deferred" and restore.get("Return") == "ignore"
    command = restore.get("ExeCommand", "")
    assert command == msi_document.desktop_restore_command(build.desktop_registration())
    manifest = "[%USERPROFILE]\\.pedelec\\cc.isaaclin.pedelec.json"
    # Both system programs by their full path: a bare name is looked up in the current
    # folder, then PATH, where another program could stand in for it.
    assert f'if exist "{manifest}" "[System64Folder]reg.exe" add ' in command
    shell = actions["SetRegistrationShell"]
    assert shell.get("Value") == "[System64Folder]cmd.exe"
    assert '"HKCU\\Software\\Google\\Chrome\\NativeMessagingHosts\\cc.isaaclin.pedelec"' in command
    scheduled = {c.get("Action"): c for c in elements(root, "Custom")}
    for name in ("SetRegistrationShell", "RestoreDesktopRegistration"):
        assert scheduled[name].text == msi_document.FINAL_REMOVAL
    sequence = [int(scheduled[n].get("Sequence", "0"))
                for n in ("SetRegistrationShell", "RestoreDesktopRegistration")]  # fmt: skip
    # After RemoveRegistryValues (2600), before RemoveFiles (3500): inside the script.
    assert 2600 < sequence[0] < sequence[1] < 3500


@pytest.mark.parametrize("compiler", ["wixl", "wix3"])
@pytest.mark.parametrize("scope", ["per-user", "per-machine"])
def test_the_installed_executable_checks_its_folder_before_any_key_names_it(
    compiler: str, scope: str
) -> None:
    """Either package runs the executable it just wrote with `--check-folder`
    (launcher.c), inside the script, failing the install on a non-zero exit; the Windows
    lane installs into a folder Everyone may write (tests/windows/test_msi_lifecycle.py)."""
    root = parsed(compiler) if scope == "per-user" else machine_parsed(compiler)
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    check = actions[msi_document.FOLDER_CHECK]
    (executable,) = [f for f in elements(root, "File") if f.get("Id") == check.get("FileKey")]
    assert executable.get("Source") == "pedelec-native-host-msi/1.2.3/pedelec-native-host.exe"
    assert check.get("ExeCommand") == "--check-folder"
    assert (check.get("Execute"), check.get("Return"), check.get("Impersonate")) == (
        "deferred", "check", "yes")  # fmt: skip
    scheduled = {c.get("Action"): c for c in elements(root, "Custom")}
    row = scheduled[msi_document.FOLDER_CHECK]
    assert row.text == 'NOT REMOVE~="ALL"', "never at removal: the executable is gone by then"
    # After InstallFiles (4000), before WriteRegistryValues (5000).
    assert 4000 < int(row.get("Sequence", "0")) < 5000


def test_a_bundle_without_its_executable_is_refused() -> None:
    with pytest.raises(msi_document.PackageError, match=r"no 1\.2\.3/pedelec-native-host\.exe"):
        parsed(files=["current", "1.2.3/cc.isaaclin.pedelec.json"])


@pytest.mark.parametrize("version", ["0.2.0rc1", "1.0", "256.0.0", "1.2.65536", "1.2.3.4", ""])
def test_a_version_windows_installer_cannot_compare_is_refused(version: str) -> None:
    with pytest.raises(msi_document.PackageError):
        msi_document.msi_version(version)


def test_a_bundle_without_its_manifest_is_refused() -> None:
    with pytest.raises(msi_document.PackageError, match=r"no 1\.2\.3/cc\.isaaclin\.pedelec\.json"):
        parsed(files=["current", "1.2.3/pedelec-native-host.exe"])


def test_the_product_and_package_codes_are_the_versions_own_in_every_build() -> None:
    root = parsed()
    (product,) = elements(root, "Product")
    (package,) = elements(root, "Package")
    version = product.get("Version", "")
    assert product.get("Id") == msi_document.product_code(version)
    assert package.get("Id") == msi_document.package_code(version)
    assert msi_document.product_code(version) == msi_document.product_code(version)
    assert msi_document.product_code("1.0.1") != msi_document.product_code("1.0.0")
    assert msi_document.package_code(version) != msi_document.product_code(version)


# --- the per-machine package (issue 31) ------------------------------------------------------
def machine_parsed(compiler: str = "wixl") -> ElementTree.Element:
    product = product_at("1.2.3")
    text = msi_document.document(
        product, FILES, "pedelec-native-host-msi", build.host_keys(msi_document.PER_MACHINE), None,
        compiler, msi_document.PER_MACHINE,
    )  # fmt: skip
    return ElementTree.fromstring(text)


def test_the_per_machine_package_installs_into_program_files_and_asks_for_an_administrator() -> (
    None
):
    root = machine_parsed()
    (package,) = elements(root, "Package")
    assert package.get("InstallScope") == "perMachine"
    (product,) = elements(root, "Product")
    assert (
        product.get("UpgradeCode") == msi_document.MACHINE_UPGRADE_CODE != msi_document.UPGRADE_CODE
    )
    user = msi_document.PER_USER
    assert product.get("Id") == msi_document.product_code("1.2.3", msi_document.PER_MACHINE)
    assert product.get("Id") != msi_document.product_code("1.2.3", user), "two products"
    assert package.get("Id") != msi_document.package_code("1.2.3", user)
    (condition,) = elements(root, "Condition")
    assert condition.text == "Privileged" and "administrator" in condition.get("Message", "")
    (install,) = [d for d in elements(root, "Directory") if d.get("Id") == "INSTALLDIR"]
    (program_files,) = [d for d in elements(root, "Directory") if install in list(d)]
    assert program_files.get("Id") == "ProgramFiles64Folder"
    actions = {a.get("Id") for a in elements(root, "CustomAction")}
    assert msi_document.FOLDER_CHECK in actions
    assert not actions & {"SetRegistrationShell", "RestoreDesktopRegistration"}, (
        "the Desktop's HKCU key is not a machine's"
    )


def test_the_per_machine_package_writes_hklm_only_and_shares_no_component() -> None:
    root = machine_parsed()
    values = elements(root, "RegistryValue")
    assert {v.get("Root") for v in values} == {"HKLM"}
    hosts = {v.get("Key") for v in values if v.get("Key", "").endswith("cc.isaaclin.pedelec")}
    user_hosts = {k.path for k in build.host_keys()}
    assert hosts == user_hosts  # the same vendor keys as `install --scope system`
    assert {k.hive for k in build.host_keys(msi_document.PER_MACHINE)} == {"HKLM"}
    for component in elements(root, "Component"):
        assert component.get("Win64") == "yes", component.get("Id")
        keys = [v for v in component.iter(WIX + "RegistryValue") if v.get("KeyPath") == "yes"]
        assert len(keys) == 1 and keys[0].get("Root") == "HKLM", component.get("Id")
    searches = elements(root, "RegistrySearch")
    assert {(s.get("Root"), s.get("Win64")) for s in searches} == {("HKLM", "yes")}
    machine = {c.get("Guid") for c in elements(root, "Component")}
    assert machine.isdisjoint(c.get("Guid") for c in elements(parsed(), "Component"))


@pytest.mark.parametrize("compiler", ["wixl", "wix3"])
def test_the_per_machine_package_marks_its_upgrades_and_removes_its_versions_in_hklm(
    compiler: str,
) -> None:
    """Its own key is HKLM's; the deferred actions that remove its folder in Program Files
    and its key run as the installer's service (impersonated, without the elevation,
    they could do neither), the immediate mark as the elevated installing user."""
    root = machine_parsed(compiler)
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    scope = msi_document.PER_MACHINE
    mark, unmark = msi_document.upgrade_mark_commands(scope)
    assert f'"HKLM\\{msi_document.COMPONENTS_KEY}"' in mark
    assert actions["MarkUpgrade"].get("ExeCommand") == mark
    assert actions["UnmarkUpgrade"].get("ExeCommand") == unmark
    removal = actions["RemoveVersions"].get("ExeCommand", "")
    assert removal == msi_document.versions_removal_command("[INSTALLDIR]", scope)
    assert f'delete "HKLM\\{msi_document.PACKAGE_KEY}" /f' in removal
    for name in ("UnmarkUpgrade", "RemoveVersions"):
        assert (actions[name].get("Execute"), actions[name].get("Impersonate")) == (
            "deferred", "no")  # fmt: skip
    components = {c.get("Id") for c in elements(root, "Component")}
    permanent = msi_document.permanent_components(product_at("1.2.3"), FILES)
    assert set(permanent) <= components and len(permanent) == 7


@pytest.mark.parametrize("scope", ["per-user", "per-machine"])
def test_the_installed_executable_tidies_older_versions_once_registered(scope: str) -> None:
    """`tidy` (native_host/versions.py) after the keys name the new version, never at
    removal, never failing the install; per machine as the installer's service, which
    alone may remove a folder of Program Files."""
    root = parsed() if scope == "per-user" else machine_parsed()
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    tidy = actions[msi_document.TIDY]
    command = tidy.get("ExeCommand", "")
    (key,) = re.findall(r'^/d /s /c ""\[#([^\]]+)\]" tidy <NUL >NUL 2>&1"$', command)
    (executable,) = [f for f in elements(root, "File") if f.get("Id") == key]
    assert executable.get("Source") == "pedelec-native-host-msi/1.2.3/pedelec-native-host.exe"
    assert actions["SetTidyShell"].get("Value") == "[System64Folder]cmd.exe"
    assert (tidy.get("Property"), tidy.get("Execute"), tidy.get("Return")) == (
        "PEDELEC_TIDY_SHELL", "deferred", "ignore")  # fmt: skip
    assert tidy.get("Impersonate") == {"per-user": "yes", "per-machine": "no"}[scope]
    rows = {c.get("Action"): c for c in elements(root, "Custom")}
    at = [int(rows[name].get("Sequence", "0")) for name in ("SetTidyShell", msi_document.TIDY)]
    assert {rows[name].text for name in ("SetTidyShell", msi_document.TIDY)} == {
        'NOT REMOVE~="ALL"'
    }
    # After WriteRegistryValues (5000), before InstallFinalize (6600).
    assert 5000 < at[0] < at[1] < 6600


@pytest.mark.parametrize("scope", ["per-user", "per-machine"])
def test_a_rolled_back_install_takes_its_version_folder_with_it(scope: str) -> None:
    """Permanent components outlive a rollback as they outlive an uninstall (Wine's
    does); a rollback action removes the version's own folder, and nothing beside it."""
    root = parsed() if scope == "per-user" else machine_parsed()
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    undo = actions["UndoVersionFolder"]
    assert undo.get("ExeCommand") == (
        '/d /s /c "rmdir /s /q "[INSTALLDIR]1.2.3" & rmdir "[INSTALLDIR]""'
    )
    assert (undo.get("Execute"), undo.get("Return")) == ("rollback", "ignore")
    assert undo.get("Impersonate") == {"per-user": "yes", "per-machine": "no"}[scope]
    assert msi_document.rollback_actions(product_at("1.2.3")) == ["UndoVersionFolder"]
    rows = {c.get("Action"): c for c in elements(root, "Custom")}
    at = [int(rows[name].get("Sequence", "0")) for name in ("SetUndoShell", "UndoVersionFolder")]
    check = int(rows[msi_document.FOLDER_CHECK].get("Sequence", "0"))
    # After CreateFolders (3700), before InstallFiles (4000) and the folder check.
    assert 3700 < at[0] < at[1] < 4000 < check


def test_a_package_refuses_keys_of_the_other_scopes_hive() -> None:
    product = product_at("1.2.3")
    with pytest.raises(msi_document.PackageError, match="per-machine package writes HKLM"):
        msi_document.document(
            product, FILES, "b", build.host_keys(), None, scope=msi_document.PER_MACHINE
        )
    with pytest.raises(msi_document.PackageError, match="per-machine package writes HKLM"):
        msi_document.document(
            product, FILES, "b", build.host_keys(msi_document.PER_MACHINE),
            build.desktop_registration(), scope=msi_document.PER_MACHINE,
        )  # fmt: skip


def test_doctor_knows_the_packages_it_names_and_where_they_remember_their_folder() -> None:
    """doctor names the per-machine MSI when a policy turns user-level hosts off, and
    recognises either package's host by the folder it remembers."""
    from native_host.install.doctor.browser_policy import system_install
    from native_host.install.doctor.manifests import MSI_FOLDER_VALUE, MSI_FOLDERS
    from native_host.install.locations import Os

    machine_msi = msi_document.PER_MACHINE.msi_name.format(version="1.2.3")
    assert f"msiexec /i {machine_msi} /qn" in system_install(Os.WIN32, "1.2.3")
    assert MSI_FOLDER_VALUE == msi_document.REMEMBERED_FOLDER
    assert [(key.hive, key.path) for _, key in MSI_FOLDERS] == [
        (scope.hive, msi_document.COMPONENTS_KEY) for scope in msi_document.SCOPES
    ]


# --- what next, after a double-clicked install (issue 32) ------------------------------------
def test_the_start_menu_entry_opens_a_prompt_in_the_executables_folder_running_doctor() -> None:
    """The version's own folder (issue 30), where `pedelec-native-host` runs by name."""
    root = parsed()
    (shortcut,) = elements(root, "Shortcut")
    assert shortcut.get("Name") == msi_document.START_MENU_ENTRY
    assert shortcut.get("Target") == "[System64Folder]cmd.exe"
    (version,) = [d for d in elements(root, "Directory") if d.get("Name") == "1.2.3"]
    assert shortcut.get("WorkingDirectory") == version.get("Id")
    assert any(f.get("Name") == "pedelec-native-host.exe" for f in version.iter(WIX + "File"))
    assert shortcut.get("Arguments") == (
        '/d /s /k "title Pedelec native messaging host& '
        '"[INSTALLDIR]1.2.3\\pedelec-native-host.exe" doctor"'
    )
    menus = [d for d in elements(root, "Directory") if d.get("Id") == "ProgramMenuFolder"]
    assert len(menus) == 1 and shortcut in list(menus[0].iter(WIX + "Shortcut"))


def test_a_double_clicked_install_opens_that_window_when_it_is_done() -> None:
    """Only a full UI (UILevel 5: a double click; /qb and /qn are 3 and 2), only when this
    version is being installed (not a repair, not a removal), after InstallFinalize,
    without waiting for the window."""
    root = parsed()
    actions = {a.get("Id"): a for a in elements(root, "CustomAction")}
    opening = actions["OpenCheckWindow"]
    assert opening.get("ExeCommand") == msi_document.check_command("1.2.3/pedelec-native-host.exe")
    assert (opening.get("Execute"), opening.get("Return")) == ("immediate", "asyncNoWait")
    assert actions["SetCheckShell"].get("Value") == "[System64Folder]cmd.exe"
    scheduled = {c.get("Action"): c for c in elements(root, "Custom")}
    for name in ("SetCheckShell", "OpenCheckWindow"):
        assert scheduled[name].text == "UILevel = 5 AND NOT Installed AND NOT REMOVE"
    order = [int(scheduled[n].get("Sequence", "0")) for n in ("SetCheckShell", "OpenCheckWindow")]
    assert 6600 < order[0] < order[1]  # InstallFinalize is 6600


def test_the_per_machine_package_has_the_entry_for_every_user_and_opens_no_window() -> None:
    """Run elevated, a window after the install would check the administrator's account:
    the per-machine package has the Start-menu entry (every user's) only."""
    root = machine_parsed()
    (shortcut,) = elements(root, "Shortcut")
    assert shortcut.get("Arguments") == msi_document.check_command("1.2.3/pedelec-native-host.exe")
    (entry,) = [c for c in elements(root, "Component") if c.get("Id") == "StartMenuEntry"]
    keys = [v for v in entry.iter(WIX + "RegistryValue") if v.get("KeyPath") == "yes"]
    assert keys[0].get("Root") == "HKLM"
    scheduled = {c.get("Action") for c in elements(root, "Custom")}
    assert scheduled.isdisjoint({"SetCheckShell", "OpenCheckWindow"}), scheduled
