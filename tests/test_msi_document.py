"""The per-user MSI's WiX source (packaging/windows/msi_document.py), read back as XML:
what Windows Installer will do with it, on any system. The Windows lane builds it with
wixl and installs, upgrades and removes it for real (tests/windows/test_msi*.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

from tests.support.packaging_scripts import windows_module

pytestmark = pytest.mark.unit

msi_document = windows_module("msi_document")
build = windows_module("build")
WIX = "{http://schemas.microsoft.com/wix/2006/wi}"
FILES = [
    "pedelec-native-host.exe",
    "cc.isaaclin.pedelec.json",
    "site-packages/native_host/relay.py",
    "site-packages/native_host/core/peer/windows.py",
    "site-packages/pydantic/_internal/" + "x" * 90 + ".py",
]


def product_at(version: str) -> Any:
    """The package's product at `version` (a `msi_document.Product`)."""
    return msi_document.Product(version, "cc.isaaclin.pedelec.json", "pedelec-native-host.exe")


def parsed(compiler: str = "wixl", files: list[str] | None = None) -> ElementTree.Element:
    product = product_at("1.2.3")
    text = msi_document.document(
        product, files or FILES, "pedelec-native-host", build.host_keys(),
        build.desktop_registration(), compiler,
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
    assert sorted(files) == sorted(f"pedelec-native-host/{name}" for name in FILES)


def test_identifiers_are_unique_in_each_table_and_fit_its_column() -> None:
    root = parsed()
    for table in ("Directory", "Component", "File", "RemoveFolder", "CustomAction"):
        ids = [e.get("Id", "") for e in elements(root, table)]
        assert len(ids) == len(set(ids)), table
        assert all(0 < len(i) <= 72 for i in ids), max(ids, key=len)


def test_component_guids_stay_the_same_from_one_version_to_the_next() -> None:
    """A component is the same component in every version: the same GUID."""
    first = {c.get("Id"): c.get("Guid") for c in elements(parsed(), "Component")}
    product = product_at("1.2.4")
    later = ElementTree.fromstring(msi_document.document(
        product, FILES, "elsewhere", build.host_keys(), build.desktop_registration()))  # fmt: skip
    assert first == {c.get("Id"): c.get("Guid") for c in elements(later, "Component")}
    assert len(set(first.values())) == len(first)


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
    assert {v.get("Value") for v in values} == {"[INSTALLDIR]cc.isaaclin.pedelec.json"}
    assert all(v.get("Root") == "HKCU" and v.get("Name") is None for v in values)


def test_the_install_folder_is_remembered_and_found_again() -> None:
    root = parsed()
    (search,) = elements(root, "RegistrySearch")
    remembered = [v for v in elements(root, "RegistryValue")
                  if v.get("Name") == msi_document.REMEMBERED_FOLDER]  # fmt: skip
    assert len(remembered) == 1 and remembered[0].get("Value") == "[INSTALLDIR]"
    assert (search.get("Key"), search.get("Name")) == (
        remembered[0].get("Key"), remembered[0].get("Name"))  # fmt: skip


@pytest.mark.parametrize(("compiler", "schedules_it"), [("wixl", True), ("wix3", False)])
def test_the_older_package_is_removed_before_the_newer_is_installed(
    compiler: str, schedules_it: bool
) -> None:
    root = parsed(compiler)
    assert root.find(f"{WIX}Product/{WIX}MajorUpgrade") is not None
    scheduled = elements(root, "RemoveExistingProducts")
    assert [int(e.get("Sequence", "0")) for e in scheduled] == (
        [msi_document.REMOVE_OLDER_AT] if schedules_it else []
    )
    # After InstallValidate (1400), before InstallInitialize (1500).
    assert 1400 < msi_document.REMOVE_OLDER_AT < 1500


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
        assert scheduled[name].text == 'REMOVE="ALL" AND NOT UPGRADINGPRODUCTCODE'
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
    assert executable.get("Source") == "pedelec-native-host/pedelec-native-host.exe"
    assert check.get("ExeCommand") == "--check-folder"
    assert (check.get("Execute"), check.get("Return"), check.get("Impersonate")) == (
        "deferred", "check", "yes")  # fmt: skip
    scheduled = {c.get("Action"): c for c in elements(root, "Custom")}
    row = scheduled[msi_document.FOLDER_CHECK]
    assert row.text == 'NOT REMOVE~="ALL"', "never at removal: the executable is gone by then"
    # After InstallFiles (4000), before WriteRegistryValues (5000).
    assert 4000 < int(row.get("Sequence", "0")) < 5000


def test_a_bundle_without_its_executable_is_refused() -> None:
    with pytest.raises(msi_document.PackageError, match=r"no pedelec-native-host\.exe"):
        parsed(files=["cc.isaaclin.pedelec.json"])


@pytest.mark.parametrize("version", ["0.2.0rc1", "1.0", "256.0.0", "1.2.65536", "1.2.3.4", ""])
def test_a_version_windows_installer_cannot_compare_is_refused(version: str) -> None:
    with pytest.raises(msi_document.PackageError):
        msi_document.msi_version(version)


def test_a_bundle_without_its_manifest_is_refused() -> None:
    with pytest.raises(msi_document.PackageError, match=r"no cc\.isaaclin\.pedelec\.json"):
        parsed(files=["pedelec-native-host.exe"])


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
        product, FILES, "pedelec-native-host", build.host_keys(msi_document.PER_MACHINE), None,
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
    assert actions == {msi_document.FOLDER_CHECK}, "the Desktop's HKCU key is not a machine's"


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
    (search,) = elements(root, "RegistrySearch")
    assert (search.get("Root"), search.get("Win64")) == ("HKLM", "yes")
    machine = {c.get("Guid") for c in elements(root, "Component")}
    assert machine.isdisjoint(c.get("Guid") for c in elements(parsed(), "Component"))


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
def test_the_start_menu_entry_opens_a_prompt_in_the_install_folder_running_doctor() -> None:
    root = parsed()
    (shortcut,) = elements(root, "Shortcut")
    assert shortcut.get("Name") == msi_document.START_MENU_ENTRY
    assert shortcut.get("Target") == "[System64Folder]cmd.exe"
    assert shortcut.get("WorkingDirectory") == "INSTALLDIR"
    assert shortcut.get("Arguments") == (
        '/d /s /k "title Pedelec native messaging host& '
        '"[INSTALLDIR]pedelec-native-host.exe" doctor"'
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
    assert opening.get("ExeCommand") == msi_document.check_command("pedelec-native-host.exe")
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
    assert shortcut.get("Arguments") == msi_document.check_command("pedelec-native-host.exe")
    (entry,) = [c for c in elements(root, "Component") if c.get("Id") == "StartMenuEntry"]
    keys = [v for v in entry.iter(WIX + "RegistryValue") if v.get("KeyPath") == "yes"]
    assert keys[0].get("Root") == "HKLM"
    scheduled = {c.get("Action") for c in elements(root, "Custom")}
    assert scheduled.isdisjoint({"SetCheckShell", "OpenCheckWindow"}), scheduled
