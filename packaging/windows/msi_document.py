"""The per-user MSI's WiX source, as a pure function of the bundle's files and the
registrations to write (packaging/windows/build.py compiles it with Debian's `wixl` or
with WiX 3 on Windows; both read this subset of WiX 3).

What the package does, and why:
- **Per user, no elevation.** `InstallScope="perUser"`, files under
  `%LOCALAPPDATA%\\Programs\\pedelec-native-host` (the per-user Programs folder).
- **Windows Installer's per-user rules.** Every component under the user profile has an
  HKCU registry value as its key path (ICE38), and removes its folder at uninstall (ICE64):
  one component per folder of the bundle, keyed on a value under `COMPONENTS_KEY`. The
  install folder is remembered there too (`REMEMBERED_FOLDER`): `INSTALLDIR=...` is honoured
  by upgrades and removal.
- **Registration.** One HKCU value per vendor key the host registers with, pointing at
  the manifest beside the executable: the caller passes the keys from the locations table
  (`native_host.install.locations`), so the MSI registers exactly where `install` would.
- **Upgrades.** A fixed `UPGRADE_CODE` and `MajorUpgrade`: a newer package removes the
  older one first, right after `InstallValidate` (no second entry in Installed apps, and
  no stale file: removed after the new one is installed, the older package would leave
  the files of every component the two share), and an older one refuses to replace a
  newer one.
- **Pedelec Desktop's registration.** The Desktop points the HKCU Chrome key at its own
  host at every foreground start (spec 5.1). Installing takes the keys over, as `install`
  does; uninstalling removes them and, when the Desktop's manifest is still there, points
  the Chrome key back at it, as `uninstall` restores what `install` replaced. A deferred
  custom action after `RemoveRegistryValues` does that with the system's own `reg.exe`,
  so it runs even if the bundle is damaged (`desktop_restore_command`); both `cmd.exe`
  and `reg.exe` are named by their full path in `[System64Folder]`, never looked up in
  the current folder or on PATH.
- **The same bytes from the same commit.** The product and package codes are derived
  from the version (`product_code`, `package_code`), not drawn at random; the build then
  dates the summary information with SOURCE_DATE_EPOCH (msi_summary.py).
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
"""Every version of this package shares it forever: it is how a newer MSI finds an older."""
PRODUCT_NAME = "Pedelec native messaging host"
MANUFACTURER = "Pedelec"
INSTALL_FOLDER = "pedelec-native-host"
"""The folder under `%LOCALAPPDATA%\\Programs`."""
COMPONENTS_KEY = r"Software\pedelec-native-host\Installer"
"""The package's own HKCU key: one value per component (its key path), and the install
folder it remembers."""
REMEMBERED_FOLDER = "InstallDir"
"""The value under `COMPONENTS_KEY` that keeps INSTALLDIR. Windows Installer keeps no
property given on the command line, and a component keyed on a registry value tells it
nothing about where its files went: without this, removing or upgrading a package
installed with `INSTALLDIR=...` would look for its files in the default folder and leave
them where they are."""
_GUID_NAMESPACE = uuid.UUID("a3a9b0c6-0f57-4b6f-8f0a-4f7e2b9d3c15")
"""Component GUIDs are uuid5(this, the component's role): the same in every version."""
REMOVE_OLDER_FIRST = {"wixl": True, "wix3": False}
"""Whether the document schedules `RemoveExistingProducts` itself: wixl's MajorUpgrade
leaves it after InstallFinalize; WiX 3's schedules it after InstallValidate (its default
`Schedule`) and refuses a second scheduling."""
REMOVE_OLDER_AT = 1401
"""Right after InstallValidate (1400), before InstallInitialize (1500)."""
RESTORE_AT = (2601, 2602)
"""Setting the shell's path, then the deferred restore: after RemoveRegistryValues
(2600), before RemoveFiles (3500), inside the script (a deferred action outside
InstallInitialize..InstallFinalize fails the package)."""
_ID_LIMIT = 72
"""Windows Installer's identifier column width."""
MSI_VERSION = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,5})$")


class PackageError(ValueError):
    """Something the MSI cannot express (a version, a file name)."""


@dataclass(frozen=True)
class Product:
    version: str
    """Windows Installer's `major.minor.build` (at most 255.255.65535)."""
    manifest: str
    """The manifest's file name, in the install folder."""


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


def _guid(role: str) -> str:
    return str(uuid.uuid5(_GUID_NAMESPACE, role)).upper()


def product_code(version: str) -> str:
    """The ProductCode of this package at `version`: one per version, the same in every
    build of it (a random one would make two builds of one commit differ)."""
    return _guid(f"product:{version}")


def package_code(version: str) -> str:
    """The package code (the summary information's revision number) at `version`."""
    return _guid(f"package:{version}")


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
) -> str:
    """The WiX source for `compiler` (`wixl` or `wix3`): `files` are the bundle's files
    (`/`-separated, relative to its root), found under `source_dir` (relative to where
    the compiler runs: wixl takes only relative sources); `keys` get the manifest's path;
    `desktop` is given back its key at uninstall."""
    msi_version(product.version)
    if product.manifest not in files:
        raise PackageError(f"the bundle holds no {product.manifest}")
    by_folder: dict[str, list[str]] = {folder: [] for folder in folders(files)}
    for name in files:
        parent = str(PurePosixPath(name).parent)
        by_folder["" if parent == "." else parent].append(name)

    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<Wix xmlns="http://schemas.microsoft.com/wix/2006/wi">',
        f"  <Product Id={quoteattr(product_code(product.version))} "
        f'Name={quoteattr(PRODUCT_NAME)} Language="1033" '
        f"Version={quoteattr(product.version)} Manufacturer={quoteattr(MANUFACTURER)} "
        f"UpgradeCode={quoteattr(UPGRADE_CODE)}>",
        f"    <Package Id={quoteattr(package_code(product.version))} "
        f"Description={quoteattr(PRODUCT_NAME)} "
        f'Manufacturer={quoteattr(MANUFACTURER)} InstallerVersion="500" '
        'Compressed="yes" InstallScope="perUser" />',
        '    <MajorUpgrade DowngradeErrorMessage="A newer version of [ProductName] is '
        'already installed." />',
        '    <MediaTemplate EmbedCab="yes" />',
        '    <Property Id="ARPNOMODIFY" Value="1" />',
        '    <Property Id="INSTALLDIR">',
        f'      <RegistrySearch Id="RememberedInstallDir" Root="HKCU" '
        f'Key={quoteattr(COMPONENTS_KEY)} Name={quoteattr(REMEMBERED_FOLDER)} Type="raw" />',
        "    </Property>",
        '    <Directory Id="TARGETDIR" Name="SourceDir">',
        '      <Directory Id="LocalAppDataFolder">',
        '        <Directory Id="UserProgramsFolder" Name="Programs">',
        # The per-user Programs folder may hold other programs: removed only when empty.
        f'          <Component Id="UserProgramsFolder" Guid={quoteattr(_guid("Programs"))}>',
        f"            {_key_path('UserProgramsFolder')}",
        '            <RemoveFolder Id="RemoveUserProgramsFolder" On="uninstall" />',
        "          </Component>",
    ]
    components: list[str] = ["UserProgramsFolder"]
    lines += _folder("", by_folder, source_dir, product, keys, components, indent="          ")
    lines += [
        "        </Directory>",
        "      </Directory>",
        "    </Directory>",
        '    <Feature Id="Host" Title="Pedelec native messaging host" Level="1">',
        *(f"      <ComponentRef Id={quoteattr(c)} />" for c in components),
        "    </Feature>",
    ]
    sequence = []
    if REMOVE_OLDER_FIRST[compiler]:
        sequence.append(f'      <RemoveExistingProducts Sequence="{REMOVE_OLDER_AT}" />')
    if desktop is not None:
        command = desktop_restore_command(desktop)
        condition = _text('REMOVE="ALL" AND NOT UPGRADINGPRODUCTCODE')
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
    if sequence:
        lines += ["    <InstallExecuteSequence>", *sequence, "    </InstallExecuteSequence>"]
    lines += ["  </Product>", "</Wix>", ""]
    return "\n".join(lines)


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _key_path(component: str) -> str:
    """The HKCU value a component is keyed on (ICE38)."""
    return (
        f'<RegistryValue Root="HKCU" Key={quoteattr(COMPONENTS_KEY)} '
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
) -> list[str]:
    """One `<Directory>` of the bundle: its component (files, key path, folder removal,
    and in the root the host's registry values), then its subfolders."""
    name = PurePosixPath(folder).name if folder else INSTALL_FOLDER
    directory = "INSTALLDIR" if not folder else _identifier("d_", folder)
    component = "Bundle" if not folder else _identifier("c_", folder)
    components.append(component)
    inner = indent + "  "
    lines = [
        f"{indent}<Directory Id={quoteattr(directory)} Name={quoteattr(name)}>",
        f"{inner}<Component Id={quoteattr(component)} Guid={quoteattr(_guid('folder:' + folder))}"
        ' Win64="yes">',
        f"{inner}  {_key_path(component)}",
        f"{inner}  <RemoveFolder Id={quoteattr(_identifier('r_', folder or 'root'))} "
        'On="uninstall" />',
    ]
    if not folder:
        lines.append(
            f'{inner}  <RegistryValue Root="HKCU" Key={quoteattr(COMPONENTS_KEY)} '
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
        manifest = f"[INSTALLDIR]{product.manifest}"
        for key in keys:
            host = _identifier("k_", key.path)
            components.append(host)
            lines += [
                f"{inner}<Component Id={quoteattr(host)} Guid={quoteattr(_guid('key:' + key.path))}"
                ' Win64="yes">',
                f"{inner}  <RegistryValue Root={quoteattr(key.hive)} Key={quoteattr(key.path)} "
                f'Type="string" Value={quoteattr(manifest)} KeyPath="yes" />',
                f"{inner}</Component>",
            ]
    children = [f for f in by_folder if f and str(PurePosixPath(f).parent) == (folder or ".")]
    for child in children:
        lines += _folder(child, by_folder, source_dir, product, keys, components, inner)
    lines.append(f"{indent}</Directory>")
    return lines
