"""The MSIs' WiX source, as a pure function of the bundle's files, the registrations to
write and the package's scope (packaging/windows/build.py compiles it with Debian's
`wixl` or with WiX 3 on Windows; both read this subset of WiX 3).

Two packages come from one bundle, their differences a table (`PackageScope`:
`PER_USER`, `PER_MACHINE`):
- **Per user, no elevation** (`PER_USER`, pedelec-native-host-<version>-x64.msi).
  `InstallScope="perUser"`, files under `%LOCALAPPDATA%\\Programs\\pedelec-native-host`
  (the per-user Programs folder), keys and key paths in HKCU.
- **Per machine, for administrators** (`PER_MACHINE`, ...-x64-machine.msi): for browsers
  whose policy turns user-level hosts off (`NativeMessagingUserLevelHosts` false: Chromium
  then reads only HKLM, launch_context_win.cc's FindManifest). `InstallScope="perMachine"`
  (ALLUSERS=1; the summary's word count without the "no elevation" bit), a launch
  condition on `Privileged` that says it needs an administrator, files under
  `%ProgramFiles%\\pedelec-native-host`, keys and key paths in HKLM's 64-bit view. Its own
  package, not a mode of the per-user one: administrators' tools deploy a per-machine
  MSI as it is (`msiexec /i <msi> /qn`, Intune's device context, Group Policy assigned to
  computers, which installs it at startup); a dual-purpose package (ALLUSERS=2 with
  MSIINSTALLPERUSER) depends on Windows Installer 5 honouring MSIINSTALLPERUSER, which
  Wine's does not (it installed ALLUSERS=2 per machine), so its per-user mode could not be
  tested here; and an upgrade code of its own lets both be installed at once, each
  upgraded and removed on its own. Its component GUIDs are its own for the same reason.
- **Windows Installer's per-user rules.** Every component under the user profile has an
  HKCU registry value as its key path (ICE38), and removes its folder at uninstall (ICE64):
  one component per folder of the bundle, keyed on a value under `COMPONENTS_KEY`. The
  install folder is remembered there too (`REMEMBERED_FOLDER`): `INSTALLDIR=...` is honoured
  by upgrades and removal.
- **Registration.** One HKCU value per vendor key the host registers with, pointing at
  the manifest beside the executable: the caller passes the keys from the locations table
  (`native_host.install.locations`), so the MSI registers exactly where `install` would.
- **Upgrades.** A fixed `UPGRADE_CODE` and `MajorUpgrade`: a newer package removes the
  older one first, before its own files go in (no second entry in Installed apps, and
  no stale file: removed after the new one is installed, the older package would leave
  the files of every component the two share), and an older one refuses to replace a
  newer one.
- **Upgrades under running hosts, without a prompt or a reboot** (issue 30; both
  packages). Each version lives in a folder of its own, `INSTALLDIR\\<version>`, whose
  components are permanent (`permanent_components`): the removal of the older package,
  which runs while hosts of that version may still serve a browser, touches none of their
  files. Windows Installer therefore finds no file in use: no FilesInUse or Restart
  Manager dialog, nothing closed (`MSIRESTARTMANAGERCONTROL` is `Disable` all the same,
  so Restart Manager never shuts a host down), no file scheduled for a reboot. The
  registration and `INSTALLDIR\\current` (native_host/versions.py) name the new folder at
  once; the older folder is removed by the installed executable's `tidy` when no host
  runs from it (`tidy_older_versions`), else by its last host as it exits (per user;
  per machine, its users' hosts cannot remove a folder of Program Files: the next
  install's `tidy` does), and uninstalling removes the whole folder and the package's
  key (`versions_removal`; a file still in use then stays until it is not). That
  removal, and the Desktop's key given back, must not run when an upgrade removes the
  older package: Windows Installer says so with `UPGRADINGPRODUCTCODE`, which Wine's
  msiexec does not set there, so the newer package also marks its upgrade in its own
  key (`upgrade_mark`) before the older one is removed, and takes the mark away in its
  script.
- **Pedelec Desktop's registration** (per user only: the Desktop writes HKCU, which a
  per-machine install leaves alone). The Desktop points the HKCU Chrome key at its own
  host at every foreground start (spec 5.1). Installing takes the keys over, as `install`
  does; uninstalling removes them and, when the Desktop's manifest is still there, points
  the Chrome key back at it, as `uninstall` restores what `install` replaced. A deferred
  custom action after `RemoveRegistryValues` does that with the system's own `reg.exe`,
  so it runs even if the bundle is damaged (`desktop_restore_command`); both `cmd.exe`
  and `reg.exe` are named by their full path in `[System64Folder]`, never looked up in
  the current folder or on PATH.
- **An install folder no other user can change** (both packages). A deferred custom
  action right after `InstallFiles` runs the installed executable, whose every start
  checks its folder and every folder above it (launcher.c): into a folder others can
  write it exits 3, which fails the install, and Windows Installer's rollback removes
  what it wrote (`folder_check`).
- **The same bytes from the same commit.** The product and package codes are derived
  from the version and the package (`product_code`, `package_code`), not drawn at
  random; the build then
  dates the summary information with SOURCE_DATE_EPOCH (msi_summary.py).
- **What next** (`first_contact`). A Start-menu entry, `START_MENU_ENTRY` (the user's own
  Start menu per user, every user's per machine), opens a command prompt in the
  version's folder that runs the host's `doctor`: its report ends with the first thing to fix, and
  the prompt stays open, where `pedelec-native-host` runs by name. A double-clicked
  per-user install (full UI, which wixl's package has no dialogs of its own for) opens
  that same window when it has finished; a silent or basic-UI install does not, nor does
  the per-machine package (run elevated, its window would check the administrator's
  account, not the users').
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from xml.sax.saxutils import quoteattr

UPGRADE_CODE = "6d0f4b3e-3c1a-4f5e-9b7a-2f0c8d1e5a61"
"""Every version of the per-user package shares it forever: it is how a newer MSI finds an
older."""
MACHINE_UPGRADE_CODE = "b7c9e2a4-5d61-4f08-8e3b-1a6f0c9d2e74"
"""The per-machine package's, forever: its own, so the two coexist and upgrade apart."""
PRODUCT_NAME = "Pedelec native messaging host"
MANUFACTURER = "Pedelec"
INSTALL_FOLDER = "pedelec-native-host"
"""The folder under `%LOCALAPPDATA%\\Programs`."""
COMPONENTS_KEY = r"Software\pedelec-native-host\Installer"
"""The package's own key, in its scope's hive: one value per component (its key path),
and the install folder it remembers."""
PACKAGE_KEY = COMPONENTS_KEY.rsplit("\\", 1)[0]
"""The key `COMPONENTS_KEY` is in, the package's alone: uninstalling removes it whole."""
REMEMBERED_FOLDER = "InstallDir"
"""The value under `COMPONENTS_KEY` that keeps INSTALLDIR. Windows Installer keeps no
property given on the command line, and a component keyed on a registry value tells it
nothing about where its files went: without this, removing or upgrading a package
installed with `INSTALLDIR=...` would look for its files in the default folder and leave
them where they are."""
_GUID_NAMESPACE = uuid.UUID("a3a9b0c6-0f57-4b6f-8f0a-4f7e2b9d3c15")
"""Component GUIDs are uuid5(this, the component's role): the same in every version."""
REMOVE_OLDER_AFTER = {"wixl": "", "wix3": ' Schedule="afterInstallInitialize"'}
"""Where `RemoveExistingProducts` goes: after the upgrade is marked (`MARK_AT`), before
the newer package's files go in. WiX 3 is told in `MajorUpgrade`; wixl, whose
MajorUpgrade takes no `Schedule` and leaves the action after InstallFinalize, gets the
row itself (`REMOVE_OLDER_AT`)."""
REMOVE_OLDER_AT = {"wixl": 1403, "wix3": None}
"""After InstallValidate (1400) and the mark (`MARK_AT`), before InstallInitialize (1500)."""
UPGRADING = "Upgrading"
"""The value under `COMPONENTS_KEY` that says a newer package is replacing this one."""
MARK_AT = (1401, 1402)
"""Setting the shell's path, then the mark: immediate, right after InstallValidate
(1400), before the older package is removed."""
UNMARK_AT = (5001, 5002)
"""The mark taken away: after WriteRegistryValues (5000), inside the script."""
FINAL_REMOVAL = 'REMOVE="ALL" AND NOT UPGRADINGPRODUCTCODE AND NOT PEDELEC_UPGRADING'
"""The package is being removed for good, not replaced by a newer one: what the uninstall
custom actions run on."""
UPGRADE_DETECTED = "WIX_UPGRADE_DETECTED"
"""The property `MajorUpgrade` sets when an older version is installed."""
PERMANENT = ' Permanent="yes"'
"""A component Windows Installer never removes (WiX 3's attribute; see
`permanent_components` for wixl)."""
REMOVE_VERSIONS_AT = (3501, 3502)
"""The install folder's removal at uninstall: after RemoveFiles (3500), inside the script."""
RESTORE_AT = (2601, 2602)
"""Setting the shell's path, then the deferred restore: after RemoveRegistryValues
(2600), before RemoveFiles (3500), inside the script (a deferred action outside
InstallInitialize..InstallFinalize fails the package)."""
START_MENU_ENTRY = "Pedelec native messaging host - check"
"""The Start-menu shortcut's name (what a user types in Start to find it)."""
WINDOW_TITLE = "Pedelec native messaging host"
AFTER_INSTALL_AT = 6601
"""Right after InstallFinalize (6600): the files and keys are in place."""
_ID_LIMIT = 72
"""Windows Installer's identifier column width."""
MSI_VERSION = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,5})$")


class PackageError(ValueError):
    """Something the MSI cannot express (a version, a file name)."""


@dataclass(frozen=True)
class PackageScope:
    """Everything the per-user and the per-machine package do differently."""

    name: str
    install_scope: str
    """WiX's `Package/@InstallScope`: ALLUSERS and the summary's elevation bit."""
    upgrade_code: str
    hive: str
    """Where the host's keys, the components' key paths and the remembered folder go."""
    parents: tuple[tuple[str, str], ...]
    """The folders above INSTALLDIR: (Windows Installer's folder property, name; "" for
    a system folder itself)."""
    removed_when_empty: str
    """A parent folder other programs share, removed at uninstall when empty ("" none)."""
    guid_role: str
    """Prefixed to every component's role: the two packages share no component."""
    needs_elevation: bool
    """A launch condition on `Privileged`, saying why."""
    msi_name: str
    """The release file's name (`{version}` filled in)."""


PER_USER = PackageScope(
    "per-user", "perUser", UPGRADE_CODE, "HKCU",
    (("LocalAppDataFolder", ""), ("UserProgramsFolder", "Programs")), "UserProgramsFolder",
    "", False, "pedelec-native-host-{version}-x64.msi",
)  # fmt: skip
PER_MACHINE = PackageScope(
    "per-machine", "perMachine", MACHINE_UPGRADE_CODE, "HKLM",
    (("ProgramFiles64Folder", ""),), "", "machine:", True,
    "pedelec-native-host-{version}-x64-machine.msi",
)  # fmt: skip
SCOPES = (PER_USER, PER_MACHINE)
NEEDS_ADMINISTRATOR = (
    "[ProductName] for every user of this computer installs into Program Files and "
    "registers the host in HKLM: run it as an administrator (msiexec /i <package> /qn from "
    "an elevated prompt, Intune, or Group Policy). For yourself alone, install "
    "pedelec-native-host-[ProductVersion]-x64.msi instead."
)


@dataclass(frozen=True)
class Product:
    version: str
    """Windows Installer's `major.minor.build` (at most 255.255.65535)."""
    manifest: str
    """The manifest's path in the install folder (`/`-separated)."""
    executable: str
    """The bundle's executable (its path in the install folder), which checks its own
    folder."""
    version_folder: str = ""
    """The folder of this version's bundle in the install folder, whose components are
    permanent; empty for a package without one."""


@dataclass(frozen=True)
class HostKey:
    """A registry key whose default value names the manifest (spec 5.2)."""

    hive: str
    path: str


@dataclass(frozen=True)
class DesktopRegistration:
    """Where Pedelec Desktop registers its own host: a key and a manifest path, both in
    Windows Installer's formatted syntax (`[%USERPROFILE]`)."""

    key: HostKey
    manifest: str


def msi_version(version: str) -> str:
    """The package version of a release version `X.Y.Z` (PackageError otherwise:
    Windows Installer compares only three numbers, so a pre-release cannot be told
    from its release)."""
    match = MSI_VERSION.match(version)
    if not match or int(match[1]) > 255 or int(match[2]) > 255 or int(match[3]) > 65535:
        raise PackageError(
            f"version {version!r} is not a release X.Y.Z within 255.255.65535, "
            "which is all Windows Installer compares"
        )
    return version


def _identifier(prefix: str, text: str) -> str:
    """A Windows Installer identifier for `text`: readable when it fits, else hashed."""
    readable = prefix + re.sub(r"[^A-Za-z0-9_.]", "_", text)
    if len(readable) <= _ID_LIMIT:
        return readable
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{readable[: _ID_LIMIT - 17]}_{digest}"


def _guid(role: str, scope: PackageScope = PER_USER) -> str:
    return str(uuid.uuid5(_GUID_NAMESPACE, scope.guid_role + role)).upper()


def product_code(version: str, scope: PackageScope = PER_USER) -> str:
    """The ProductCode of the `scope` package at `version`: one per version and package,
    the same in every build of it (a random one would make two builds of one commit
    differ; the per-user and per-machine packages of one version are two products)."""
    return _guid(f"product:{version}", scope)


def package_code(version: str, scope: PackageScope = PER_USER) -> str:
    """The package code (the summary information's revision number) at `version`."""
    return _guid(f"package:{version}", scope)


REG = "[System64Folder]reg.exe"
"""The system's reg.exe by its full path: a bare `reg.exe` is looked up in the current
folder first, then PATH, where another program could stand in for it."""


def desktop_restore_command(desktop: DesktopRegistration) -> str:
    """The arguments of `cmd.exe` that point the Desktop's key back at its manifest, if
    that file exists:
    `/d /s /c "if exist "M" "[System64Folder]reg.exe" add "K" /ve /t REG_SZ /d "M" /f"`."""
    key = f"{desktop.key.hive}\\{desktop.key.path}"
    quoted = f'"{desktop.manifest}"'
    return f'/d /s /c "if exist {quoted} "{REG}" add "{key}" /ve /t REG_SZ /d {quoted} /f"'


FOLDER_CHECK = "CheckInstallFolderIsOnlyYours"
"""The custom action's name: what the log of a refused install names (error 1722,
"Action CheckInstallFolderIsOnlyYours, location: <the executable>, command:
--check-folder")."""
FOLDER_CHECK_AT = 4001
"""Right after InstallFiles (4000), before WriteRegistryValues (5000): the executable is in
its folder with the access list Windows gave it, and no key names it yet."""
FOLDER_CHECK_COMMAND = "--check-folder"
"""What the installed executable is run with: the check of every start (exit 3 when
another user could change the folder), then exit 0 without loading the interpreter
(launcher.c's CHECK_FOLDER_OPTION): nothing of the host runs inside the install."""


def folder_check(executable: str) -> tuple[list[str], list[str]]:
    """The custom action that refuses an install folder another user can write, and its
    row in InstallExecuteSequence (`executable`: its path in the bundle).

    It runs the installed executable with `FOLDER_CHECK_COMMAND`: its launcher applies the
    check of every start (its folder and every folder above it: owner and DACL) and exits,
    so the MSI and the executable judge a folder by one rule, not two copies of it.
    Deferred, so it runs inside the install script, where `Return="check"` turns exit
    status 3 into a failed install (1603; Wine's msiexec says 1627) and Windows Installer
    rolls back the files and folders it wrote; no key is written yet. Not at removal (the
    executable is gone by then).
    Impersonated: as the installing user, who may read a folder's owner and DACL without
    elevation, so a per-machine package can run it unchanged. The folder is checked after
    the files are in it, not before: until then it may not exist, and what Windows gives
    it (inherited entries) is only known once it does."""
    condition = _text('NOT REMOVE~="ALL"')
    action = (
        f"    <CustomAction Id={quoteattr(FOLDER_CHECK)} "
        f"FileKey={quoteattr(_identifier('f_', executable))} "
        f'ExeCommand={quoteattr(FOLDER_CHECK_COMMAND)} Execute="deferred" Impersonate="yes" '
        'Return="check" />'
    )
    row = (
        f'      <Custom Action={quoteattr(FOLDER_CHECK)} Sequence="{FOLDER_CHECK_AT}">'
        f"{condition}</Custom>"
    )
    return [action], [row]


def check_command(executable: str) -> str:
    """The arguments of `cmd.exe` that open a window titled after the package, run the
    host's `doctor` and keep the prompt open (`/k`; the Start-menu entry's in the
    executable's folder, so `pedelec-native-host install --extension-id ID` runs by name
    next)."""
    exe = '"[INSTALLDIR]' + executable.replace("/", "\\") + '"'
    return f'/d /s /k "title {WINDOW_TITLE}& {exe} doctor"'


@dataclass(frozen=True)
class FirstContact:
    """What tells the user the install worked and how to check it (see the module doc)."""

    directories: list[str]
    components: list[str]
    actions: list[str]
    sequence: list[str]


def first_contact(executable: str, indent: str, scope: PackageScope) -> FirstContact:
    """The Start-menu entry (its own component, keyed like the others on a value of the
    scope's hive) and, per user, the window a double-clicked install opens when it is
    done: `UILevel` 5 is a full UI, and only a first install of this version (an upgrade
    too) opens it, not a repair or a removal."""
    arguments = quoteattr(check_command(executable))
    component = "StartMenuEntry"
    inner = indent + "  "
    guid = _guid("start-menu", scope)
    directories = [
        f'{indent}<Directory Id="ProgramMenuFolder">',
        f'{inner}<Component Id={quoteattr(component)} Guid={quoteattr(guid)} Win64="yes">',
        f"{inner}  {_key_path(component, scope)}",
        f'{inner}  <Shortcut Id="CheckShortcut" Name={quoteattr(START_MENU_ENTRY)} '
        f'Description="Check that browsers can start the Pedelec native messaging host" '
        f'Target="[System64Folder]cmd.exe" Arguments={arguments} '
        f"WorkingDirectory={quoteattr(_directory_id(_parent(executable)))} />",
        f'{inner}  <RemoveFolder Id="RemoveProgramMenuFolder" On="uninstall" />',
        f"{inner}</Component>",
        f"{indent}</Directory>",
    ]
    if scope is not PER_USER:
        return FirstContact(directories, [component], [], [])
    condition = _text("UILevel = 5 AND NOT Installed AND NOT REMOVE")
    actions = [
        '    <CustomAction Id="SetCheckShell" Property="PEDELEC_CHECK_SHELL" '
        'Value="[System64Folder]cmd.exe" />',
        f'    <CustomAction Id="OpenCheckWindow" Property="PEDELEC_CHECK_SHELL" '
        f'ExeCommand={arguments} Execute="immediate" Impersonate="yes" Return="asyncNoWait" />',
    ]
    sequence = [
        f'      <Custom Action="SetCheckShell" Sequence="{AFTER_INSTALL_AT}">{condition}</Custom>',
        f'      <Custom Action="OpenCheckWindow" Sequence="{AFTER_INSTALL_AT + 1}">'
        f"{condition}</Custom>",
    ]
    return FirstContact(directories, [component], actions, sequence)


def versions_removal_command(installdir: str, scope: PackageScope) -> str:
    """The arguments of `cmd.exe` that remove the install folder with every version in
    it, and the package's own key (what permanent components leave): what uninstalling
    does after Windows Installer's own removal."""
    key = f"{scope.hive}\\{PACKAGE_KEY}"
    return f'/d /s /c "rmdir /s /q "{installdir}" & "{REG}" delete "{key}" /f"'


def upgrade_mark_commands(scope: PackageScope) -> tuple[str, str]:
    """The arguments of `cmd.exe` that mark an upgrade in the package's key, and that take
    the mark away."""
    key = f"{scope.hive}\\{COMPONENTS_KEY}"
    mark = f'/d /s /c ""{REG}" add "{key}" /v {UPGRADING} /t REG_SZ /d [ProductVersion] /f"'
    unmark = f'/d /s /c ""{REG}" delete "{key}" /v {UPGRADING} /f"'
    return mark, unmark


def impersonated(scope: PackageScope) -> str:
    """A deferred action's `Impersonate`: as the installing user for a per-user package;
    as the installer's own service for a per-machine one, whose files and keys an
    impersonated action, without the elevation, could not remove."""
    return "no" if scope.needs_elevation else "yes"


def upgrade_mark(scope: PackageScope) -> tuple[list[str], list[str]]:
    """The custom actions that mark an upgrade before the older package is removed (an
    immediate one: nothing of the script has run yet) and take the mark away in the
    script, and their rows in InstallExecuteSequence. The older package's removal reads
    the mark (`PEDELEC_UPGRADING`, `FINAL_REMOVAL`): Windows sets UPGRADINGPRODUCTCODE
    there as well; Wine's msiexec does not."""
    mark, unmark = upgrade_mark_commands(scope)
    actions = [
        '    <CustomAction Id="SetMarkShell" Property="PEDELEC_MARK_SHELL" '
        'Value="[System64Folder]cmd.exe" />',
        '    <CustomAction Id="MarkUpgrade" Property="PEDELEC_MARK_SHELL" '
        f'ExeCommand={quoteattr(mark)} Execute="immediate" Return="ignore" />',
        '    <CustomAction Id="SetUnmarkShell" Property="PEDELEC_UNMARK_SHELL" '
        'Value="[System64Folder]cmd.exe" />',
        '    <CustomAction Id="UnmarkUpgrade" Property="PEDELEC_UNMARK_SHELL" '
        f'ExeCommand={quoteattr(unmark)} Execute="deferred" '
        f'Impersonate="{impersonated(scope)}" Return="ignore" />',
    ]
    order = [
        ("SetMarkShell", MARK_AT[0]),
        ("MarkUpgrade", MARK_AT[1]),
        ("SetUnmarkShell", UNMARK_AT[0]),
        ("UnmarkUpgrade", UNMARK_AT[1]),
    ]
    rows = [
        f'      <Custom Action="{action}" Sequence="{at}">{UPGRADE_DETECTED}</Custom>'
        for action, at in order
    ]
    return actions, rows


def versions_removal(scope: PackageScope) -> tuple[list[str], list[str]]:
    """The custom actions that remove every version folder and the package's key when
    the package is removed for good (`FINAL_REMOVAL`), and their rows."""
    command = versions_removal_command("[INSTALLDIR]", scope)
    uninstalling = _text(FINAL_REMOVAL)
    actions = [
        '    <CustomAction Id="SetRemovalShell" Property="PEDELEC_REMOVAL_SHELL" '
        'Value="[System64Folder]cmd.exe" />',
        '    <CustomAction Id="RemoveVersions" Property="PEDELEC_REMOVAL_SHELL" '
        f'ExeCommand={quoteattr(command)} Execute="deferred" '
        f'Impersonate="{impersonated(scope)}" Return="ignore" />',
    ]
    rows = [
        f'      <Custom Action="SetRemovalShell" Sequence="{REMOVE_VERSIONS_AT[0]}">'
        f"{uninstalling}</Custom>",
        f'      <Custom Action="RemoveVersions" Sequence="{REMOVE_VERSIONS_AT[1]}">'
        f"{uninstalling}</Custom>",
    ]
    return actions, rows


TIDY = "RemoveUnusedVersions"
TIDY_AT = (5003, 5004)
"""Setting the shell's path, then `tidy`: after WriteRegistryValues (5000) and the
upgrade's unmark (`UNMARK_AT`), inside the script: the new version is registered by
then."""


def tidy_command(executable: str) -> str:
    """The arguments of `cmd.exe` that run the installed executable's `tidy` with its
    standard streams on NUL: a program Windows Installer starts has none a console program
    can use (Python stops at its start with "can't initialize sys standard streams")."""
    return f'/d /s /c ""[#{_identifier("f_", executable)}]" tidy <NUL >NUL 2>&1"'


def tidy_older_versions(executable: str, scope: PackageScope) -> tuple[list[str], list[str]]:
    """The custom actions that run the installed executable's `tidy` (native_host/
    versions.py): every older version folder no host runs from goes at once, and the others
    when their last host exits, which a per-machine install's hosts, run by users, could
    not do in Program Files; so it runs as the installer's service there. Never fails the
    install: an older folder left is the worst it can come to."""
    condition = _text('NOT REMOVE~="ALL"')
    actions = [
        '    <CustomAction Id="SetTidyShell" Property="PEDELEC_TIDY_SHELL" '
        'Value="[System64Folder]cmd.exe" />',
        f'    <CustomAction Id={quoteattr(TIDY)} Property="PEDELEC_TIDY_SHELL" '
        f'ExeCommand={quoteattr(tidy_command(executable))} Execute="deferred" '
        f'Impersonate="{impersonated(scope)}" Return="ignore" />',
    ]
    rows = [
        f'      <Custom Action="SetTidyShell" Sequence="{TIDY_AT[0]}">{condition}</Custom>',
        f'      <Custom Action={quoteattr(TIDY)} Sequence="{TIDY_AT[1]}">{condition}</Custom>',
    ]
    return actions, rows


UNDO_VERSION_AT = (3998, 3999)
"""Setting the shell's path, then the rollback action: before InstallFiles (4000), so a
rollback of it (the folder check failing at `FOLDER_CHECK_AT`) runs it, and after
CreateFolders (3700), so Windows Installer's own rollback of that, which comes after,
finds the install folder empty."""


def undo_version_folder(product: Product, scope: PackageScope) -> tuple[list[str], list[str]]:
    """The rollback custom action that removes this version's folder when the install is
    rolled back (a folder check refusing it): its components are permanent, which Wine's
    rollback, as an uninstall would, leaves in place. Only this version's folder (in an
    upgrade the older one's hosts may be running from the folder beside it), then the
    install folder if that left it empty."""
    folder = product.version_folder.replace("/", "\\")
    command = f'/d /s /c "rmdir /s /q "[INSTALLDIR]{folder}" & rmdir "[INSTALLDIR]""'
    condition = _text('NOT REMOVE~="ALL"')
    actions = [
        '    <CustomAction Id="SetUndoShell" Property="PEDELEC_UNDO_SHELL" '
        'Value="[System64Folder]cmd.exe" />',
        '    <CustomAction Id="UndoVersionFolder" Property="PEDELEC_UNDO_SHELL" '
        f'ExeCommand={quoteattr(command)} Execute="rollback" '
        f'Impersonate="{impersonated(scope)}" Return="ignore" />',
    ]
    rows = [
        f'      <Custom Action="SetUndoShell" Sequence="{UNDO_VERSION_AT[0]}">{condition}</Custom>',
        f'      <Custom Action="UndoVersionFolder" Sequence="{UNDO_VERSION_AT[1]}">'
        f"{condition}</Custom>",
    ]
    return actions, rows


def rollback_actions(product: Product) -> list[str]:
    """The custom actions that run only when the install rolls back (`wixl` takes no
    `Execute="rollback"`: build.py sets their type in its output)."""
    return ["UndoVersionFolder"] if product.version_folder else []


def in_version_folder(folder: str, product: Product) -> bool:
    """Whether a folder of the install folder is (inside) this version's own."""
    own = product.version_folder
    return bool(own) and (folder == own or folder.startswith(own + "/"))


def permanent_components(product: Product, files: Sequence[str]) -> list[str]:
    """The components of this version's folder: never removed by Windows Installer (not
    when a newer package replaces this one while hosts of it run); `wixl` takes no
    `Permanent` attribute, so build.py sets their attribute bit in its output
    (`wixl_fixups`)."""
    return [_component_id(f) for f in folders(files) if in_version_folder(f, product)]


def _component_id(folder: str) -> str:
    return "Bundle" if not folder else _identifier("c_", folder)


def _directory_id(folder: str) -> str:
    return "INSTALLDIR" if not folder else _identifier("d_", folder)


def _parent(name: str) -> str:
    """The folder of a file of the install folder (`""`: the install folder)."""
    parent = str(PurePosixPath(name).parent)
    return "" if parent == "." else parent


def folders(files: Sequence[str]) -> list[str]:
    """Every folder of the bundle (`""` is its root), parents first."""
    found = {""}
    for name in files:
        parent = PurePosixPath(name).parent
        while str(parent) != ".":
            found.add(str(parent))
            parent = parent.parent
    return sorted(found, key=lambda f: (f.count("/") if f else -1, f))


def document(
    product: Product,
    files: Sequence[str],
    source_dir: str,
    keys: Sequence[HostKey],
    desktop: DesktopRegistration | None,
    compiler: str = "wixl",
    scope: PackageScope = PER_USER,
) -> str:
    """The WiX source for `compiler` (`wixl` or `wix3`) of the `scope` package: `files`
    are the bundle's files (`/`-separated, relative to its root), found under
    `source_dir` (relative to where the compiler runs: wixl takes only relative
    sources); `keys` (in the scope's hive) get the manifest's path; `desktop` is given
    back its key at uninstall."""
    msi_version(product.version)
    for needed in (product.manifest, product.executable):
        if needed not in files:
            raise PackageError(f"the bundle holds no {needed}")
    strays = [k for k in keys if k.hive != scope.hive]
    if strays or (desktop is not None and scope.hive != desktop.key.hive):
        raise PackageError(f"a {scope.name} package writes {scope.hive} only")
    by_folder: dict[str, list[str]] = {folder: [] for folder in folders(files)}
    for name in files:
        parent = str(PurePosixPath(name).parent)
        by_folder["" if parent == "." else parent].append(name)

    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<Wix xmlns="http://schemas.microsoft.com/wix/2006/wi">',
        f"  <Product Id={quoteattr(product_code(product.version, scope))} "
        f'Name={quoteattr(PRODUCT_NAME)} Language="1033" '
        f"Version={quoteattr(product.version)} Manufacturer={quoteattr(MANUFACTURER)} "
        f"UpgradeCode={quoteattr(scope.upgrade_code)}>",
        f"    <Package Id={quoteattr(package_code(product.version, scope))} "
        f"Description={quoteattr(PRODUCT_NAME)} "
        f'Manufacturer={quoteattr(MANUFACTURER)} InstallerVersion="500" '
        f'Compressed="yes" InstallScope={quoteattr(scope.install_scope)} />',
    ]
    if scope.needs_elevation:
        lines.append(
            f"    <Condition Message={quoteattr(NEEDS_ADMINISTRATOR)}>Privileged</Condition>"
        )
    lines += [
        '    <MajorUpgrade DowngradeErrorMessage="A newer version of [ProductName] is '
        f'already installed."{REMOVE_OLDER_AFTER[compiler]} />',
        '    <MediaTemplate EmbedCab="yes" />',
        '    <Property Id="ARPNOMODIFY" Value="1" />',
        '    <Property Id="MSIRESTARTMANAGERCONTROL" Value="Disable" />',
        '    <Property Id="INSTALLDIR">',
        f'      <RegistrySearch Id="RememberedInstallDir" Root={quoteattr(scope.hive)} '
        f'Key={quoteattr(COMPONENTS_KEY)} Name={quoteattr(REMEMBERED_FOLDER)} Type="raw" '
        'Win64="yes" />',
        "    </Property>",
        '    <Property Id="PEDELEC_UPGRADING">',
        f'      <RegistrySearch Id="UpgradeUnderWay" Root={quoteattr(scope.hive)} '
        f'Key={quoteattr(COMPONENTS_KEY)} Name={quoteattr(UPGRADING)} Type="raw" '
        'Win64="yes" />',
        "    </Property>",
        '    <Directory Id="TARGETDIR" Name="SourceDir">',
    ]
    components: list[str] = []
    indent = "      "
    for folder_id, name in scope.parents:
        named = f" Name={quoteattr(name)}" if name else ""
        lines.append(f"{indent}<Directory Id={quoteattr(folder_id)}{named}>")
        indent += "  "
        if folder_id == scope.removed_when_empty:
            # It may hold other programs: removed only when empty.
            lines += [
                f"{indent}<Component Id={quoteattr(folder_id)} "
                f"Guid={quoteattr(_guid(name, scope))}>",
                f"{indent}  {_key_path(folder_id, scope)}",
                f'{indent}  <RemoveFolder Id="Remove{folder_id}" On="uninstall" />',
                f"{indent}</Component>",
            ]
            components.append(folder_id)
    lines += _folder("", by_folder, source_dir, product, keys, components, indent, scope, compiler)
    for _ in scope.parents:
        indent = indent[:-2]
        lines.append(f"{indent}</Directory>")
    contact = first_contact(product.executable, indent, scope)
    components += contact.components
    lines += [
        *contact.directories,
        "    </Directory>",
        '    <Feature Id="Host" Title="Pedelec native messaging host" Level="1">',
        *(f"      <ComponentRef Id={quoteattr(c)} />" for c in components),
        "    </Feature>",
    ]
    lines += contact.actions
    sequence = [*contact.sequence]
    if REMOVE_OLDER_AT[compiler] is not None:
        sequence.append(f'      <RemoveExistingProducts Sequence="{REMOVE_OLDER_AT[compiler]}" />')
    check_action, check_row = folder_check(product.executable)
    lines += check_action
    sequence += check_row
    if product.version_folder:
        tidy = tidy_older_versions(product.executable, scope)
        undo = undo_version_folder(product, scope)
        for actions, rows in (upgrade_mark(scope), versions_removal(scope), undo, tidy):
            lines += actions
            sequence += rows
    if desktop is not None:
        command = desktop_restore_command(desktop)
        condition = _text(FINAL_REMOVAL)
        lines += [
            '    <CustomAction Id="SetRegistrationShell" Property="PEDELEC_SHELL" '
            'Value="[System64Folder]cmd.exe" />',
            '    <CustomAction Id="RestoreDesktopRegistration" Property="PEDELEC_SHELL" '
            f'ExeCommand={quoteattr(command)} Execute="deferred" Impersonate="yes" '
            'Return="ignore" />',
        ]
        sequence += [
            f'      <Custom Action="SetRegistrationShell" Sequence="{RESTORE_AT[0]}">'
            f"{condition}</Custom>",
            f'      <Custom Action="RestoreDesktopRegistration" Sequence="{RESTORE_AT[1]}">'
            f"{condition}</Custom>",
        ]
    lines += ["    <InstallExecuteSequence>", *sequence, "    </InstallExecuteSequence>"]
    lines += ["  </Product>", "</Wix>", ""]
    return "\n".join(lines)


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _key_path(component: str, scope: PackageScope = PER_USER) -> str:
    """The value a component is keyed on: HKCU per user (ICE38), HKLM per machine."""
    return (
        f"<RegistryValue Root={quoteattr(scope.hive)} Key={quoteattr(COMPONENTS_KEY)} "
        f'Name={quoteattr(component)} Type="integer" Value="1" KeyPath="yes" />'
    )


def _folder(
    folder: str,
    by_folder: dict[str, list[str]],
    source_dir: str,
    product: Product,
    keys: Sequence[HostKey],
    components: list[str],
    indent: str,
    scope: PackageScope,
    compiler: str,
) -> list[str]:
    """One `<Directory>` of the bundle: its component (files, key path, folder removal,
    and in the root the host's registry values), then its subfolders."""
    name = PurePosixPath(folder).name if folder else INSTALL_FOLDER
    directory = _directory_id(folder)
    component = _component_id(folder)
    components.append(component)
    inner = indent + "  "
    guid = _guid("folder:" + folder, scope)
    permanent = PERMANENT if in_version_folder(folder, product) and compiler == "wix3" else ""
    lines = [
        f"{indent}<Directory Id={quoteattr(directory)} Name={quoteattr(name)}>",
        f"{inner}<Component Id={quoteattr(component)} Guid={quoteattr(guid)} "
        f'Win64="yes"{permanent}>',
        f"{inner}  {_key_path(component, scope)}",
        f"{inner}  <RemoveFolder Id={quoteattr(_identifier('r_', folder or 'root'))} "
        'On="uninstall" />',
    ]
    if not folder:
        lines.append(
            f"{inner}  <RegistryValue Root={quoteattr(scope.hive)} Key={quoteattr(COMPONENTS_KEY)} "
            f'Name={quoteattr(REMEMBERED_FOLDER)} Type="string" Value="[INSTALLDIR]" />'
        )
    for file in sorted(by_folder[folder]):
        source = f"{source_dir}/{file}" if source_dir else file
        lines.append(
            f"{inner}  <File Id={quoteattr(_identifier('f_', file))} "
            f"Name={quoteattr(PurePosixPath(file).name)} Source={quoteattr(source)} />"
        )
    lines.append(f"{inner}</Component>")
    if not folder:
        manifest = "[INSTALLDIR]" + product.manifest.replace("/", "\\")
        for key in keys:
            host = _identifier("k_", key.path)
            components.append(host)
            key_guid = _guid("key:" + key.path, scope)
            lines += [
                f'{inner}<Component Id={quoteattr(host)} Guid={quoteattr(key_guid)} Win64="yes">',
                f"{inner}  <RegistryValue Root={quoteattr(key.hive)} Key={quoteattr(key.path)} "
                f'Type="string" Value={quoteattr(manifest)} KeyPath="yes" />',
                f"{inner}</Component>",
            ]
    children = [f for f in by_folder if f and str(PurePosixPath(f).parent) == (folder or ".")]
    for child in children:
        lines += _folder(
            child, by_folder, source_dir, product, keys, components, inner, scope, compiler
        )
    lines.append(f"{indent}</Directory>")
    return lines
