"""Where each Chromium-based browser looks for the host manifest, as data (spec 5.2-5.3).

Everything here is a pure function of (platform, environment, home): no file system, no
registry. Paths come back in the flavour of the *target* platform (`PureWindowsPath` for
win32) so the Windows table can be tested on Linux.

Lookup facts that shape the table:
- Linux/macOS read `<user-data-dir>/NativeMessagingHosts` (user level), then a system
  directory fixed by branding.
- Windows reads only the registry: a key whose default value is the manifest's path.
  One manifest file serves every key.
- macOS Brave, Arc and Opera have been seen reading Chrome's user directory, so they are
  registered in both.
- Sandboxed Linux browsers are rows of their own (spec 5.4), detected by their data dirs:
  a Flatpak reads `~/.var/app/<app-id>/config/<browser>/NativeMessagingHosts` and can run
  only what its sandbox can see (hence the `flatpak-spawn --host` wrapper); a Snap cannot
  start a host outside its confinement at all, so it has no targets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePath, PurePosixPath, PureWindowsPath

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID, paths

MANIFEST_FILE = f"{HOST_NAME}.json"
NMH_SUBDIR = "NativeMessagingHosts"
APP_DIR = "pedelec-native-host"
EXTENSION_ID_RE = re.compile(r"^[a-p]{32}$")


class Os(StrEnum):
    LINUX = "linux"
    DARWIN = "darwin"
    WIN32 = "win32"


class Scope(StrEnum):
    USER = "user"
    SYSTEM = "system"


class Sandbox(StrEnum):
    """How a browser is packaged: natively, or confined (Linux only)."""

    NONE = ""
    FLATPAK = "flatpak"
    SNAP = "snap"


class UnsupportedPlatformError(ValueError):
    """The platform has no Chromium native messaging layout we know."""


@dataclass(frozen=True)
class BrowserRow:
    """One (browser, channel, OS) row of the table; scope is applied by `targets`.

    Templates start with a variable: `{config}` (Linux config home), `{home}` (the user
    home, for sandboxed rows), `{appsupport}` (macOS `~/Library/Application Support`) or
    `{localappdata}` or `{appdata}` (Windows).
    """

    browser: str
    channel: str
    os: Os
    label: str
    user_data_dir: str
    system_dirs: tuple[str, ...] = ()
    also_user_data_dirs: tuple[str, ...] = ()
    """Other user data dirs whose NativeMessagingHosts this browser is seen to read."""
    registry_vendor: str | None = None
    """Windows: the vendor key the installer writes under HKCU/HKLM."""
    registry_lookup: tuple[str, ...] = ()
    """Windows: vendor keys the browser reads, in order (spec 5.2)."""
    note: str = ""
    sandbox: Sandbox = Sandbox.NONE
    sandbox_id: str = ""
    """The Flatpak app id or the snap name."""

    @property
    def name(self) -> str:
        """The `--browser` word: the family, the channel unless stable, the sandbox if any."""
        name = self.browser if self.channel == "stable" else f"{self.browser}-{self.channel}"
        return f"{name}-{self.sandbox.value}" if self.sandbox is not Sandbox.NONE else name


# --- branding-fixed system directories (spec 5.2, 5.3) ----------------------
_CHROME_SYS_LINUX = "/etc/opt/chrome/native-messaging-hosts"
_CHROMIUM_SYS_LINUX = "/etc/chromium/native-messaging-hosts"
_EDGE_SYS_LINUX = "/etc/opt/edge/native-messaging-hosts"
_CHROME_SYS_MAC = "/Library/Google/Chrome/NativeMessagingHosts"
_CHROMIUM_SYS_MAC = "/Library/Application Support/Chromium/NativeMessagingHosts"
_EDGE_SYS_MAC = "/Library/Microsoft/Edge/NativeMessagingHosts"

# --- Windows vendor keys --------------------------------------------------
_REG_CHROME = r"Software\Google\Chrome"
_REG_CHROMIUM = r"Software\Chromium"
_REG_EDGE = r"Software\Microsoft\Edge"

_MAC_CHROME_USER = "{appsupport}/Google/Chrome"
_UNVERIFIED = "system directory unverified"
_USER_UNVERIFIED = "user directory unverified"
_ARC_WIN_PROFILE = "Packages/TheBrowserCompany.Arc_ttt1ap7aakyb4/LocalCache/Local/Arc/User Data"
_ARC_WIN_NOTE = "registry key and profile location unverified"
_READS_CHROME = (_REG_CHROME,)
_READS_CHROMIUM = (_REG_CHROMIUM, _REG_CHROME)
_READS_EDGE = (_REG_EDGE, _REG_CHROMIUM, _REG_CHROME)


def _linux(
    browser: str, channel: str, label: str, subdir: str, *system: str, note: str = ""
) -> BrowserRow:
    """A Linux row: user data dir `{config}/<subdir>`."""
    return BrowserRow(browser, channel, Os.LINUX, label, f"{{config}}/{subdir}", system, note=note)


def _flatpak(browser: str, channel: str, label: str, app_id: str, subdir: str) -> BrowserRow:
    """A Flatpak row: the sandbox's XDG config home is `~/.var/app/<app-id>/config`, and it
    sees neither the host's `/etc` nor its `~/.config` (spec 5.4): user level only."""
    user = f"{{home}}/.var/app/{app_id}/config/{subdir}"
    return BrowserRow(
        browser,
        channel,
        Os.LINUX,
        f"{label} (Flatpak)",
        user,
        sandbox=Sandbox.FLATPAK,
        sandbox_id=app_id,
    )


def _snap(browser: str, label: str, snap: str) -> BrowserRow:
    """A Snap row, detected by `~/snap/<name>`: confinement stops it from starting any
    host outside the snap, so nothing can be registered (spec 5.4)."""
    return BrowserRow(
        browser,
        "stable",
        Os.LINUX,
        f"{label} (Snap)",
        f"{{home}}/snap/{snap}",
        sandbox=Sandbox.SNAP,
        sandbox_id=snap,
    )


def _mac(
    browser: str,
    channel: str,
    label: str,
    subdir: str,
    *system: str,
    also: tuple[str, ...] = (),
    note: str = "",
) -> BrowserRow:
    """A macOS row: user data dir `~/Library/Application Support/<subdir>`."""
    user = f"{{appsupport}}/{subdir}"
    return BrowserRow(browser, channel, Os.DARWIN, label, user, system, also, note=note)


def _win(
    browser: str,
    channel: str,
    label: str,
    subdir: str,
    write: str,
    reads: tuple[str, ...],
    note: str = "",
) -> BrowserRow:
    """A Windows row: user data dir `%LOCALAPPDATA%/<subdir>`, vendor key written/read."""
    user = f"{{localappdata}}/{subdir}"
    return BrowserRow(
        browser,
        channel,
        Os.WIN32,
        label,
        user,
        registry_vendor=write,
        registry_lookup=reads,
        note=note,
    )


TABLE: tuple[BrowserRow, ...] = (
    _linux("chrome", "stable", "Google Chrome", "google-chrome", _CHROME_SYS_LINUX),
    _linux("chrome", "beta", "Google Chrome Beta", "google-chrome-beta", _CHROME_SYS_LINUX),
    _linux("chrome", "dev", "Google Chrome Dev", "google-chrome-unstable", _CHROME_SYS_LINUX),
    _linux("chrome", "canary", "Google Chrome Canary", "google-chrome-canary", _CHROME_SYS_LINUX),
    _linux("chrome", "for-testing", "Chrome for Testing", "google-chrome-for-testing",
           _CHROMIUM_SYS_LINUX, note=_UNVERIFIED),
    _linux("chromium", "stable", "Chromium", "chromium", _CHROMIUM_SYS_LINUX),
    _linux("edge", "stable", "Microsoft Edge", "microsoft-edge", _EDGE_SYS_LINUX),
    _linux("edge", "beta", "Microsoft Edge Beta", "microsoft-edge-beta", _EDGE_SYS_LINUX),
    _linux("edge", "dev", "Microsoft Edge Dev", "microsoft-edge-dev", _EDGE_SYS_LINUX),
    _linux("brave", "stable", "Brave", "BraveSoftware/Brave-Browser", _CHROMIUM_SYS_LINUX,
           note=_UNVERIFIED),
    _linux("vivaldi", "stable", "Vivaldi", "vivaldi", "/etc/opt/vivaldi/native-messaging-hosts",
           "/etc/vivaldi/native-messaging-hosts", note=_UNVERIFIED),
    _flatpak("chrome", "stable", "Google Chrome", "com.google.Chrome", "google-chrome"),
    _flatpak("chrome", "dev", "Google Chrome Dev", "com.google.ChromeDev",
             "google-chrome-unstable"),
    _flatpak("chromium", "stable", "Chromium", "org.chromium.Chromium", "chromium"),
    _flatpak("ungoogled-chromium", "stable", "ungoogled-chromium",
             "io.github.ungoogled_software.ungoogled_chromium", "chromium"),
    _flatpak("edge", "stable", "Microsoft Edge", "com.microsoft.Edge", "microsoft-edge"),
    _flatpak("brave", "stable", "Brave", "com.brave.Browser", "BraveSoftware/Brave-Browser"),
    _flatpak("vivaldi", "stable", "Vivaldi", "com.vivaldi.Vivaldi", "vivaldi"),
    _snap("chromium", "Chromium", "chromium"),
    _snap("brave", "Brave", "brave"),
    _snap("vivaldi", "Vivaldi", "vivaldi"),
    _mac("chrome", "stable", "Google Chrome", "Google/Chrome", _CHROME_SYS_MAC),
    _mac("chrome", "beta", "Google Chrome Beta", "Google/Chrome Beta", _CHROME_SYS_MAC),
    _mac("chrome", "dev", "Google Chrome Dev", "Google/Chrome Dev", _CHROME_SYS_MAC),
    _mac("chrome", "canary", "Google Chrome Canary", "Google/Chrome Canary", _CHROME_SYS_MAC),
    _mac("chrome", "for-testing", "Chrome for Testing", "Google/Chrome for Testing",
         _CHROMIUM_SYS_MAC, note=_UNVERIFIED),
    _mac("chromium", "stable", "Chromium", "Chromium", _CHROMIUM_SYS_MAC),
    _mac("edge", "stable", "Microsoft Edge", "Microsoft Edge", _EDGE_SYS_MAC),
    _mac("edge", "beta", "Microsoft Edge Beta", "Microsoft Edge Beta", _EDGE_SYS_MAC),
    _mac("edge", "dev", "Microsoft Edge Dev", "Microsoft Edge Dev", _EDGE_SYS_MAC),
    _mac("edge", "canary", "Microsoft Edge Canary", "Microsoft Edge Canary", _EDGE_SYS_MAC),
    _mac("brave", "stable", "Brave", "BraveSoftware/Brave-Browser", _CHROMIUM_SYS_MAC,
         also=(_MAC_CHROME_USER,)),
    _mac("vivaldi", "stable", "Vivaldi", "Vivaldi",
         "/Library/Application Support/Vivaldi/NativeMessagingHosts", note=_UNVERIFIED),
    # Arc (macOS): user data dir per arc://version ("Profile Path .../Arc/User Data/Default");
    # reported reading Chrome's user dir too (keepassxreboot/keepassxc-browser#2336).
    _mac("arc", "stable", "Arc", "Arc/User Data", _CHROME_SYS_MAC, also=(_MAC_CHROME_USER,),
         note=_UNVERIFIED),
    # Opera (macOS): Opera's extension docs (operasoftware/devopera, message-passing.md) name
    # only /Library/Google/Chrome/NativeMessagingHosts; the user dir is Opera's user data dir
    # (Chromium reads <user-data-dir>/NativeMessagingHosts), also Chrome's, as installers do.
    _mac("opera", "stable", "Opera", "com.operasoftware.Opera", _CHROME_SYS_MAC,
         also=(_MAC_CHROME_USER,), note=_USER_UNVERIFIED),
    _win("chrome", "stable", "Google Chrome", "Google/Chrome/User Data",
         _REG_CHROME, _READS_CHROME),
    _win("chrome", "beta", "Google Chrome Beta", "Google/Chrome Beta/User Data",
         _REG_CHROME, _READS_CHROME),
    _win("chrome", "dev", "Google Chrome Dev", "Google/Chrome Dev/User Data",
         _REG_CHROME, _READS_CHROME),
    _win("chrome", "canary", "Google Chrome Canary", "Google/Chrome SxS/User Data",
         _REG_CHROME, _READS_CHROME),
    _win("chromium", "stable", "Chromium", "Chromium/User Data", _REG_CHROMIUM, _READS_CHROMIUM),
    _win("edge", "stable", "Microsoft Edge", "Microsoft/Edge/User Data", _REG_EDGE, _READS_EDGE),
    _win("edge", "beta", "Microsoft Edge Beta", "Microsoft/Edge Beta/User Data",
         _REG_EDGE, _READS_EDGE),
    _win("edge", "dev", "Microsoft Edge Dev", "Microsoft/Edge Dev/User Data",
         _REG_EDGE, _READS_EDGE),
    _win("edge", "canary", "Microsoft Edge Canary", "Microsoft/Edge SxS/User Data",
         _REG_EDGE, _READS_EDGE),
    # Brave and Vivaldi on Windows: no key of their own; they read Chrome's (spec 5.3).
    _win("brave", "stable", "Brave", "BraveSoftware/Brave-Browser/User Data",
         _REG_CHROME, _READS_CHROMIUM),
    _win("vivaldi", "stable", "Vivaldi", "Vivaldi/User Data", _REG_CHROME, _READS_CHROME),
    # Opera (Windows): Opera's extension docs (operasoftware/devopera, message-passing.md):
    # "HKEY_LOCAL_MACHINE\SOFTWARE\Google\Chrome\NativeMessagingHosts\<name>"; as Chromium,
    # it reads HKCU first. Its profile is under the roaming %APPDATA%, not %LOCALAPPDATA%.
    BrowserRow("opera", "stable", Os.WIN32, "Opera", "{appdata}/Opera Software/Opera Stable",
               registry_vendor=_REG_CHROME, registry_lookup=_READS_CHROME),
    # Arc (Windows): an MSIX app, whose profile lives in its package's LocalCache; no public
    # source says which key it reads. Packaged apps read the real HKCU, and Arc is
    # Chrome-branded Chromium, so Chrome's key: unverified (docs/install.md).
    _win("arc", "stable", "Arc", _ARC_WIN_PROFILE, _REG_CHROME, _READS_CHROME, _ARC_WIN_NOTE),
)  # fmt: skip


# --- the browsers' programs: "installed" even before its first start -------------------
_MAC_APPS = ("/Applications", "{home}/Applications")
_WIN_MACHINE = ("{programfiles}", "{programfilesx86}")


def _apps(bundle: str) -> tuple[str, ...]:
    """A macOS app's executable, in /Applications or the user's own ~/Applications."""
    name = bundle.removesuffix(".app")
    return tuple(f"{folder}/{bundle}/Contents/MacOS/{name}" for folder in _MAC_APPS)


def _flatpak_exports(app_id: str) -> tuple[str, ...]:
    """What `flatpak install` (system-wide, or `--user`) exports for an app."""
    return (f"/var/lib/flatpak/exports/bin/{app_id}",
            f"{{home}}/.local/share/flatpak/exports/bin/{app_id}")  # fmt: skip


PROGRAMS: dict[tuple[Os, str], tuple[str, ...]] = {
    # Linux: where each vendor's package puts the browser itself (not a /usr/bin wrapper:
    # Ubuntu's `chromium-browser` is one that starts the Snap).
    (Os.LINUX, "chrome"): ("/opt/google/chrome/chrome",),
    (Os.LINUX, "chrome-beta"): ("/opt/google/chrome-beta/chrome",),
    (Os.LINUX, "chrome-dev"): ("/opt/google/chrome-unstable/chrome",),
    (Os.LINUX, "chrome-canary"): ("/opt/google/chrome-canary/chrome",),  # unverified
    (Os.LINUX, "chromium"): ("/usr/lib/chromium/chromium",  # Debian, Arch
                             "/usr/lib64/chromium-browser/chromium-browser",  # Fedora
                             "/usr/lib64/chromium/chromium"),  # openSUSE
    (Os.LINUX, "edge"): ("/opt/microsoft/msedge/msedge",),
    (Os.LINUX, "edge-beta"): ("/opt/microsoft/msedge-beta/msedge",),
    (Os.LINUX, "edge-dev"): ("/opt/microsoft/msedge-dev/msedge",),
    (Os.LINUX, "brave"): ("/opt/brave.com/brave/brave",),
    (Os.LINUX, "vivaldi"): ("/opt/vivaldi/vivaldi",),
    (Os.LINUX, "chrome-flatpak"): _flatpak_exports("com.google.Chrome"),
    (Os.LINUX, "chrome-dev-flatpak"): _flatpak_exports("com.google.ChromeDev"),
    (Os.LINUX, "chromium-flatpak"): _flatpak_exports("org.chromium.Chromium"),
    (Os.LINUX, "ungoogled-chromium-flatpak"):
        _flatpak_exports("io.github.ungoogled_software.ungoogled_chromium"),
    (Os.LINUX, "edge-flatpak"): _flatpak_exports("com.microsoft.Edge"),
    (Os.LINUX, "brave-flatpak"): _flatpak_exports("com.brave.Browser"),
    (Os.LINUX, "vivaldi-flatpak"): _flatpak_exports("com.vivaldi.Vivaldi"),
    (Os.LINUX, "chromium-snap"): ("/snap/bin/chromium",),
    (Os.LINUX, "brave-snap"): ("/snap/bin/brave",),
    (Os.LINUX, "vivaldi-snap"): ("/snap/bin/vivaldi",),
    (Os.DARWIN, "chrome"): _apps("Google Chrome.app"),
    (Os.DARWIN, "chrome-beta"): _apps("Google Chrome Beta.app"),
    (Os.DARWIN, "chrome-dev"): _apps("Google Chrome Dev.app"),
    (Os.DARWIN, "chrome-canary"): _apps("Google Chrome Canary.app"),
    (Os.DARWIN, "chrome-for-testing"): _apps("Google Chrome for Testing.app"),
    (Os.DARWIN, "chromium"): _apps("Chromium.app"),
    (Os.DARWIN, "edge"): _apps("Microsoft Edge.app"),
    (Os.DARWIN, "edge-beta"): _apps("Microsoft Edge Beta.app"),
    (Os.DARWIN, "edge-dev"): _apps("Microsoft Edge Dev.app"),
    (Os.DARWIN, "edge-canary"): _apps("Microsoft Edge Canary.app"),
    (Os.DARWIN, "brave"): _apps("Brave Browser.app"),
    (Os.DARWIN, "vivaldi"): _apps("Vivaldi.app"),
    (Os.DARWIN, "arc"): _apps("Arc.app"),
    (Os.DARWIN, "opera"): _apps("Opera.app"),
    # Windows: a per-machine install under Program Files, or a per-user one under
    # %LOCALAPPDATA% (the installer's choice when run without elevation).
    **{(Os.WIN32, name): tuple(f"{root}/{folder}/Application/{exe}"
                               for root in (*_WIN_MACHINE, "{localappdata}"))
       for name, folder, exe in (
           ("chrome", "Google/Chrome", "chrome.exe"),
           ("chrome-beta", "Google/Chrome Beta", "chrome.exe"),
           ("chrome-dev", "Google/Chrome Dev", "chrome.exe"),
           ("edge", "Microsoft/Edge", "msedge.exe"),
           ("edge-beta", "Microsoft/Edge Beta", "msedge.exe"),
           ("edge-dev", "Microsoft/Edge Dev", "msedge.exe"),
           ("brave", "BraveSoftware/Brave-Browser", "brave.exe"),
           ("vivaldi", "Vivaldi", "vivaldi.exe"),
       )},
    (Os.WIN32, "chrome-canary"): ("{localappdata}/Google/Chrome SxS/Application/chrome.exe",),
    (Os.WIN32, "edge-canary"): ("{localappdata}/Microsoft/Edge SxS/Application/msedge.exe",),
    (Os.WIN32, "chromium"): ("{localappdata}/Chromium/Application/chrome.exe",),
    (Os.WIN32, "opera"): ("{localappdata}/Programs/Opera/opera.exe",),  # unverified
    # Arc on Windows is an MSIX package (its folder's name carries a version): profile only.
}  # fmt: skip
"""Where each browser's program is, per OS: a browser installed but never started has no
user data dir yet, but its program is there. A path starting with `/` is a system path
(tests put a whole machine under a root of their own); the others start with a variable."""


@dataclass(frozen=True)
class Program:
    """One place a browser's program may be."""

    path: PurePath
    system: bool
    """A fixed system path (`/opt/...`, `/Applications/...`), not under a variable's folder."""


def row_programs(row: BrowserRow, env: Mapping[str, str], home: PurePath) -> tuple[Program, ...]:
    """Where the browser's program may be, in the order looked at."""
    variables = _variables(row.os, env, home)
    return tuple(
        Program(_expand(template, row.os, variables), template.startswith("/"))
        for template in PROGRAMS.get((row.os, row.name), ())
    )


class RegistryView(StrEnum):
    """Which of 64-bit Windows' two registry views a key is read in (`KEY_WOW64_*`)."""

    WOW64_32 = "32"
    WOW64_64 = "64"


REGISTRY_VIEWS = (RegistryView.WOW64_32, RegistryView.WOW64_64)
"""The order Chromium reads them in, per hive: "First check 32-bit registry and then try
64-bit" (chrome/browser/extensions/api/messaging/launch_context_win.cc, GetManifestPath)."""


@dataclass(frozen=True)
class RegistryKey:
    """A key whose default REG_SZ value is the manifest path, in one registry view.

    Install writes the 64-bit view; HKCU\\Software is one key in both views, HKLM\\SOFTWARE
    is two (the 32-bit one is `WOW6432Node`), so a 32-bit value there shadows ours.
    """

    hive: str
    """`HKCU` or `HKLM`."""
    path: str
    view: RegistryView = RegistryView.WOW64_64

    def in_view(self, view: RegistryView) -> RegistryKey:
        """The same key read in another view."""
        return RegistryKey(self.hive, self.path, view)

    def __str__(self) -> str:
        suffix = " (32-bit view)" if self.view is RegistryView.WOW64_32 else ""
        return f"{self.hive}\\{self.path}{suffix}"


@dataclass(frozen=True)
class Target:
    """One place a browser reads the manifest from: a file, plus a registry key on Windows."""

    browser: str
    label: str
    scope: Scope
    manifest_path: PurePath
    user_data_dir: PurePath | None
    """Its existence means "this browser is installed" (None for a custom profile root)."""
    registry_key: RegistryKey | None = None
    note: str = ""
    sandbox: Sandbox = Sandbox.NONE
    sandbox_id: str = ""


def normalize_platform(platform: str) -> Os:
    """Map `sys.platform` to a table OS; BSDs use the Linux layout, as Chromium does."""
    if platform == "darwin":
        return Os.DARWIN
    if platform in ("win32", "cygwin"):
        return Os.WIN32
    if platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return Os.LINUX
    raise UnsupportedPlatformError(f"no native messaging layout known for platform {platform!r}")


def home_from_env(env: Mapping[str, str], platform: str) -> PurePath:
    """The user home browsers use, by the host's one rule (`paths.user_home`):
    %USERPROFILE% on Windows, HOME elsewhere."""
    os_name = normalize_platform(platform)
    rule = "win32" if os_name is Os.WIN32 else platform
    return _flavour(os_name)(paths.user_home(env, rule))


def _flavour(os_name: Os) -> type[PurePath]:
    return PureWindowsPath if os_name is Os.WIN32 else PurePosixPath


def _variables(os_name: Os, env: Mapping[str, str], home: PurePath) -> dict[str, str]:
    """Values of the template variables: Linux honours CHROME_CONFIG_HOME, then XDG."""
    if os_name is Os.LINUX:
        config = (
            env.get("CHROME_CONFIG_HOME") or env.get("XDG_CONFIG_HOME") or str(home / ".config")
        )
        return {"config": config, "home": str(home)}
    if os_name is Os.DARWIN:
        return {"appsupport": str(home / "Library" / "Application Support"), "home": str(home)}
    return {
        "localappdata": env.get("LOCALAPPDATA") or str(home / "AppData" / "Local"),
        "appdata": env.get("APPDATA") or str(home / "AppData" / "Roaming"),
        "programdata": env.get("PROGRAMDATA") or env.get("ALLUSERSPROFILE") or r"C:\ProgramData",
        "programfiles": env.get("ProgramFiles") or env.get("PROGRAMFILES") or r"C:\Program Files",
        "programfilesx86": env.get("ProgramFiles(x86)")
        or env.get("PROGRAMFILES(X86)")
        or r"C:\Program Files (x86)",
    }


def _expand(template: str, os_name: Os, variables: Mapping[str, str]) -> PurePath:
    return _flavour(os_name)(template.format_map(variables))


def rows_for(platform: str) -> tuple[BrowserRow, ...]:
    """The table rows of one platform."""
    os_name = normalize_platform(platform)
    return tuple(row for row in TABLE if row.os is os_name)


def select_rows(platform: str, names: Iterable[str] | None) -> tuple[BrowserRow, ...]:
    """Rows for the given browser words, in any case (`all` or None = every row); unknown
    words raise."""
    rows = rows_for(platform)
    wanted = [name.lower() for name in names] if names is not None else ["all"]
    if "all" in wanted:
        return rows
    by_name = {row.name: row for row in rows}
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        raise ValueError(
            f"unknown browser {', '.join(unknown)} on {normalize_platform(platform)}; "
            f"choose from: all, {', '.join(by_name)}"
        )
    return tuple(by_name[name] for name in dict.fromkeys(wanted))


def windows_manifest_path(env: Mapping[str, str], home: PurePath, scope: Scope) -> PureWindowsPath:
    """The single manifest file every Windows registry key points at."""
    variables = _variables(Os.WIN32, env, home)
    root = variables["localappdata"] if scope is Scope.USER else variables["programdata"]
    return PureWindowsPath(root) / APP_DIR / MANIFEST_FILE


def launcher_dir(platform: str, env: Mapping[str, str], home: PurePath, scope: Scope) -> PurePath:
    """Where a system-scope launcher lives (user scope uses the install record dir)."""
    os_name = normalize_platform(platform)
    if os_name is Os.WIN32:
        return PureWindowsPath(_variables(os_name, env, home)["programdata"]) / APP_DIR
    return PurePosixPath("/usr/local/lib") / APP_DIR


def row_user_data_dir(row: BrowserRow, env: Mapping[str, str], home: PurePath) -> PurePath:
    """The browser's default user data dir (its existence means "installed")."""
    return _expand(row.user_data_dir, row.os, _variables(row.os, env, home))


def targets(
    platform: str,
    env: Mapping[str, str],
    home: PurePath,
    scope: Scope,
    names: Iterable[str] | None = None,
) -> list[Target]:
    """Every place to register the host for the given browsers (all when `names` is None).

    Several targets may share a manifest path (Brave and Chrome on macOS, every Windows
    key); the installer writes each file once.
    """
    os_name = normalize_platform(platform)
    variables = _variables(os_name, env, home)
    result: list[Target] = []
    for row in select_rows(platform, names):
        user_data = _expand(row.user_data_dir, os_name, variables)
        if os_name is Os.WIN32:
            assert row.registry_vendor is not None
            hive = "HKCU" if scope is Scope.USER else "HKLM"
            key = RegistryKey(hive, registry_key_path(row.registry_vendor))
            manifest = windows_manifest_path(env, home, scope)
            result.append(Target(row.name, row.label, scope, manifest, user_data, key, row.note))
            continue
        if row.sandbox is Sandbox.SNAP:
            continue  # nothing a Snap reads can start a host
        if scope is Scope.USER:
            dirs = [user_data] + [_expand(t, os_name, variables) for t in row.also_user_data_dirs]
            manifest_dirs = [d / NMH_SUBDIR for d in dirs]
        else:
            manifest_dirs = [_expand(d, os_name, variables) for d in row.system_dirs]
        result.extend(
            Target(
                row.name,
                row.label,
                scope,
                d / MANIFEST_FILE,
                user_data,
                None,
                row.note,
                row.sandbox,
                row.sandbox_id,
            )
            for d in manifest_dirs
        )
    return result


def lookup_order(platform: str, env: Mapping[str, str], home: PurePath, name: str) -> list[Target]:
    """Where one browser looks, in the order it looks: user level, then system level.

    On Windows, as Chromium's FindManifest: HKCU before HKLM, in each the 32-bit view
    before the 64-bit one, in each view every vendor key the browser reads; the manifest
    path is whatever the key's value says, so `manifest_path` is only the installer's default.
    """
    (row,) = select_rows(platform, [name])
    os_name = normalize_platform(platform)
    if os_name is not Os.WIN32:
        return targets(platform, env, home, Scope.USER, [name]) + targets(
            platform, env, home, Scope.SYSTEM, [name]
        )
    user_data = row_user_data_dir(row, env, home)
    return [
        Target(
            row.name,
            row.label,
            scope,
            windows_manifest_path(env, home, scope),
            user_data,
            RegistryKey(hive, registry_key_path(vendor), view),
            row.note,
        )
        for scope, hive in ((Scope.USER, "HKCU"), (Scope.SYSTEM, "HKLM"))
        for view in REGISTRY_VIEWS
        for vendor in row.registry_lookup
    ]


def registry_key_path(vendor: str) -> str:
    """`<vendor>\\NativeMessagingHosts\\cc.isaaclin.pedelec`."""
    return f"{vendor}\\{NMH_SUBDIR}\\{HOST_NAME}"


def custom_target(user_data_dir: PurePath) -> Target:
    """A profile root started with `--user-data-dir` (tests, Puppeteer, CI): Chrome reads
    `<dir>/NativeMessagingHosts`, never `<dir>/Default/...` (spec 5.2)."""
    return Target(
        "profile",
        f"profile root {user_data_dir}",
        Scope.USER,
        user_data_dir / NMH_SUBDIR / MANIFEST_FILE,
        None,
    )


def extension_origin(extension_id: str) -> str:
    """`chrome-extension://<id>/`, with the trailing slash Chrome compares."""
    return f"chrome-extension://{extension_id}/"


def normalize_extension_id(value: str) -> str:
    """Accept a bare id or its origin; raise ValueError unless it is 32 chars in a-p."""
    candidate = value.strip()
    if candidate.startswith("chrome-extension://"):
        candidate = candidate.removeprefix("chrome-extension://").rstrip("/")
    if not EXTENSION_ID_RE.match(candidate):
        hint = ""
        if EXTENSION_ID_RE.match(candidate.lower()):
            hint = f"; lowercase? Chrome's ids are: {candidate.lower()}"
        raise ValueError(f"{value!r} is not an extension id (32 characters a-p){hint}")
    return candidate


def allowed_origins(extra_ids: Sequence[str]) -> list[str]:
    """The official origin first, then each extra id once."""
    ids = dict.fromkeys([OFFICIAL_EXTENSION_ID, *extra_ids])
    return [extension_origin(i) for i in ids]


# --- sandboxed browsers (spec 5.4) ---------------------------------------------------
FLATPAK_WRAPPER_DIR = "pedelec-native-host"
FLATPAK_WRAPPER = "pedelec-native-host"


def flatpak_app_dir(home: PurePath, app_id: str) -> PurePosixPath:
    """`~/.var/app/<app-id>`: the part of the home a Flatpak app always sees, at the same
    path inside its sandbox as outside."""
    return PurePosixPath(str(home)) / ".var" / "app" / app_id


def flatpak_wrapper_path(home: PurePath, app_id: str) -> PurePosixPath:
    """The in-sandbox wrapper the manifest points at (under the app's own data dir)."""
    return flatpak_app_dir(home, app_id) / "data" / FLATPAK_WRAPPER_DIR / FLATPAK_WRAPPER


def flatpak_override_paths(
    env: Mapping[str, str], home: PurePath, app_id: str
) -> tuple[PurePosixPath, ...]:
    """Where `flatpak override` keeps an app's permission overrides: per user (what
    `flatpak override --user` writes), then system-wide."""
    data = env.get("XDG_DATA_HOME") or str(PurePosixPath(str(home)) / ".local" / "share")
    return (
        PurePosixPath(data) / "flatpak" / "overrides" / app_id,
        PurePosixPath("/var/lib/flatpak/overrides") / app_id,
    )


# --- Pedelec Desktop's own registration (spec 5.1) --------------------------------------
_DESKTOP_HOST = {Os.LINUX: "pedelec-native-host", Os.DARWIN: "pedelec-native-host",
                 Os.WIN32: "pedelec-native-host.exe"}  # fmt: skip


def desktop_host_paths(
    platform: str, env: Mapping[str, str], home: PurePath
) -> tuple[PurePath, ...]:
    """The host Pedelec Desktop copies at every foreground start: `~/.pedelec/pedelec-native-host`
    (`.exe` on Windows), also under `$PEDELEC_HOME` when that is set."""
    os_name = normalize_platform(platform)
    flavour = _flavour(os_name)
    homes = [flavour(str(home)) / ".pedelec"]
    if env.get("PEDELEC_HOME"):
        homes.append(flavour(env["PEDELEC_HOME"]))
    return tuple(dict.fromkeys(h / _DESKTOP_HOST[os_name] for h in homes))


def desktop_manifest_path(platform: str, home: PurePath) -> PurePath | None:
    """The manifest file the Desktop writes: `%USERPROFILE%\\.pedelec\\<name>.json` on
    Windows (its HKCU Chrome key points there), Chrome's user directory on macOS, none
    on Linux (the Desktop registers no host there)."""
    os_name = normalize_platform(platform)
    if os_name is Os.WIN32:
        return PureWindowsPath(str(home)) / ".pedelec" / MANIFEST_FILE
    if os_name is Os.DARWIN:
        support = PurePosixPath(str(home)) / "Library" / "Application Support"
        return support / "Google" / "Chrome" / NMH_SUBDIR / MANIFEST_FILE
    return None
