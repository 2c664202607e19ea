"""The browser locations table, as pure functions of (platform, env, home)."""

from __future__ import annotations

from pathlib import PurePath, PurePosixPath, PureWindowsPath

import pytest

from native_host import OFFICIAL_EXTENSION_ID
from native_host.install import locations as loc
from native_host.install.locations import RegistryKey, RegistryView, Scope

pytestmark = pytest.mark.unit

HOME = PurePosixPath("/home/ann")
MAC_HOME = PurePosixPath("/Users/ann")
WIN_HOME = PureWindowsPath(r"C:\Users\ann")
MANIFEST = "cc.isaaclin.pedelec.json"
KEY_TAIL = r"NativeMessagingHosts\cc.isaaclin.pedelec"


def manifest_paths(
    platform: str, env: dict[str, str], home: PurePath, scope: Scope, names: list[str]
) -> list[str]:
    return [str(t.manifest_path) for t in loc.targets(platform, env, home, scope, names)]


@pytest.mark.parametrize(
    ("name", "subdir"),
    [
        ("chrome", "google-chrome"),
        ("chrome-beta", "google-chrome-beta"),
        ("chrome-dev", "google-chrome-unstable"),
        ("chrome-canary", "google-chrome-canary"),
        ("chromium", "chromium"),
        ("edge", "microsoft-edge"),
        ("brave", "BraveSoftware/Brave-Browser"),
        ("vivaldi", "vivaldi"),
    ],
)
def test_linux_user_dirs_default_to_dot_config(name: str, subdir: str) -> None:
    assert manifest_paths("linux", {}, HOME, Scope.USER, [name]) == [
        f"/home/ann/.config/{subdir}/NativeMessagingHosts/{MANIFEST}"
    ]


def test_linux_honours_xdg_config_home_then_chrome_config_home() -> None:
    xdg = {"XDG_CONFIG_HOME": "/xdg"}
    assert manifest_paths("linux", xdg, HOME, Scope.USER, ["chromium"]) == [
        f"/xdg/chromium/NativeMessagingHosts/{MANIFEST}"
    ]
    both = {"XDG_CONFIG_HOME": "/xdg", "CHROME_CONFIG_HOME": "/cch"}
    assert manifest_paths("linux", both, HOME, Scope.USER, ["chrome"]) == [
        f"/cch/google-chrome/NativeMessagingHosts/{MANIFEST}"
    ]
    empty = {"XDG_CONFIG_HOME": "", "CHROME_CONFIG_HOME": ""}
    assert manifest_paths("linux", empty, HOME, Scope.USER, ["chrome"]) == [
        f"/home/ann/.config/google-chrome/NativeMessagingHosts/{MANIFEST}"
    ]


@pytest.mark.parametrize(
    ("name", "directory"),
    [
        ("chrome", "/etc/opt/chrome/native-messaging-hosts"),
        ("chrome-beta", "/etc/opt/chrome/native-messaging-hosts"),
        ("chromium", "/etc/chromium/native-messaging-hosts"),
        ("edge", "/etc/opt/edge/native-messaging-hosts"),
    ],
)
def test_linux_system_dirs_are_fixed_by_branding(name: str, directory: str) -> None:
    env = {"XDG_CONFIG_HOME": "/xdg"}
    assert manifest_paths("linux", env, HOME, Scope.SYSTEM, [name]) == [f"{directory}/{MANIFEST}"]


def test_user_data_dir_is_the_browser_dir_not_its_nativemessaginghosts() -> None:
    (target,) = loc.targets("linux", {}, HOME, Scope.USER, ["chromium"])
    assert target.user_data_dir == PurePosixPath("/home/ann/.config/chromium")
    assert target.registry_key is None


@pytest.mark.parametrize(
    ("name", "subdir"),
    [
        ("chrome", "Google/Chrome"),
        ("chrome-beta", "Google/Chrome Beta"),
        ("chrome-dev", "Google/Chrome Dev"),
        ("chrome-canary", "Google/Chrome Canary"),
        ("chromium", "Chromium"),
        ("edge", "Microsoft Edge"),
        ("edge-beta", "Microsoft Edge Beta"),
        ("edge-dev", "Microsoft Edge Dev"),
        ("edge-canary", "Microsoft Edge Canary"),
        ("vivaldi", "Vivaldi"),
    ],
)
def test_macos_user_dirs(name: str, subdir: str) -> None:
    assert manifest_paths("darwin", {}, MAC_HOME, Scope.USER, [name]) == [
        f"/Users/ann/Library/Application Support/{subdir}/NativeMessagingHosts/{MANIFEST}"
    ]


@pytest.mark.parametrize(
    ("name", "own"),
    [
        ("brave", "BraveSoftware/Brave-Browser"),
        ("arc", "Arc/User Data"),
        ("opera", "com.operasoftware.Opera"),
    ],
)
def test_macos_brave_arc_and_opera_also_get_chromes_user_dir(name: str, own: str) -> None:
    support = "/Users/ann/Library/Application Support"
    targets = loc.targets("darwin", {}, MAC_HOME, Scope.USER, [name])
    assert [str(t.manifest_path) for t in targets] == [
        f"{support}/{own}/NativeMessagingHosts/{MANIFEST}",
        f"{support}/Google/Chrome/NativeMessagingHosts/{MANIFEST}",
    ]
    # Both entries are installed only when the browser's own user data dir exists.
    assert {str(t.user_data_dir) for t in targets} == {f"{support}/{own}"}


@pytest.mark.parametrize(
    ("name", "directory"),
    [
        ("chrome", "/Library/Google/Chrome/NativeMessagingHosts"),
        ("chromium", "/Library/Application Support/Chromium/NativeMessagingHosts"),
        ("edge", "/Library/Microsoft/Edge/NativeMessagingHosts"),
        ("brave", "/Library/Application Support/Chromium/NativeMessagingHosts"),
        ("opera", "/Library/Google/Chrome/NativeMessagingHosts"),  # Opera's docs
    ],
)
def test_macos_system_dirs(name: str, directory: str) -> None:
    assert manifest_paths("darwin", {}, MAC_HOME, Scope.SYSTEM, [name]) == [
        f"{directory}/{MANIFEST}"
    ]


def test_macos_ignores_xdg() -> None:
    assert manifest_paths("darwin", {"XDG_CONFIG_HOME": "/xdg"}, MAC_HOME, Scope.USER, ["chrome"])[
        0
    ].startswith("/Users/ann/Library/Application Support/Google/Chrome/")


WIN_ENV = {"LOCALAPPDATA": r"C:\Users\ann\AppData\Local", "PROGRAMDATA": r"C:\ProgramData"}


@pytest.mark.parametrize(
    ("name", "vendor", "user_data"),
    [
        ("chrome", r"Software\Google\Chrome", r"Google\Chrome\User Data"),
        ("chrome-canary", r"Software\Google\Chrome", r"Google\Chrome SxS\User Data"),
        ("chromium", r"Software\Chromium", r"Chromium\User Data"),
        ("edge", r"Software\Microsoft\Edge", r"Microsoft\Edge\User Data"),
        ("brave", r"Software\Google\Chrome", r"BraveSoftware\Brave-Browser\User Data"),
        ("vivaldi", r"Software\Google\Chrome", r"Vivaldi\User Data"),
        (
            "arc",
            r"Software\Google\Chrome",
            r"Packages\TheBrowserCompany.Arc_ttt1ap7aakyb4\LocalCache\Local\Arc\User Data",
        ),
    ],
)
def test_windows_user_scope_is_an_hkcu_key_to_one_manifest(
    name: str, vendor: str, user_data: str
) -> None:
    (target,) = loc.targets("win32", WIN_ENV, WIN_HOME, Scope.USER, [name])
    assert target.registry_key == RegistryKey("HKCU", f"{vendor}\\{KEY_TAIL}")
    assert str(target.manifest_path) == (
        r"C:\Users\ann\AppData\Local\pedelec-native-host\cc.isaaclin.pedelec.json"
    )
    assert str(target.user_data_dir) == f"C:\\Users\\ann\\AppData\\Local\\{user_data}"


def test_windows_opera_reads_chromes_key_and_keeps_its_profile_in_roaming_appdata() -> None:
    env = dict(WIN_ENV, APPDATA=r"D:\Roaming")
    (user,) = loc.targets("win32", env, WIN_HOME, Scope.USER, ["opera"])
    assert user.registry_key == RegistryKey("HKCU", f"Software\\Google\\Chrome\\{KEY_TAIL}")
    assert str(user.user_data_dir) == r"D:\Roaming\Opera Software\Opera Stable"
    (default,) = loc.targets("win32", WIN_ENV, WIN_HOME, Scope.USER, ["opera"])
    assert str(default.user_data_dir).startswith(r"C:\Users\ann\AppData\Roaming\Opera Software")
    (system,) = loc.targets("win32", WIN_ENV, WIN_HOME, Scope.SYSTEM, ["opera"])
    assert str(system.registry_key) == f"HKLM\\Software\\Google\\Chrome\\{KEY_TAIL}"


def test_windows_all_browsers_share_one_manifest_and_three_keys() -> None:
    targets = loc.targets("win32", WIN_ENV, WIN_HOME, Scope.USER)
    assert len({t.manifest_path for t in targets}) == 1
    assert {str(t.registry_key) for t in targets} == {
        f"HKCU\\Software\\Google\\Chrome\\{KEY_TAIL}",
        f"HKCU\\Software\\Chromium\\{KEY_TAIL}",
        f"HKCU\\Software\\Microsoft\\Edge\\{KEY_TAIL}",
    }


def test_windows_system_scope_uses_hklm_and_programdata() -> None:
    (target,) = loc.targets("win32", WIN_ENV, WIN_HOME, Scope.SYSTEM, ["edge"])
    assert target.registry_key == RegistryKey("HKLM", f"Software\\Microsoft\\Edge\\{KEY_TAIL}")
    assert (
        str(target.manifest_path) == r"C:\ProgramData\pedelec-native-host\cc.isaaclin.pedelec.json"
    )


def test_windows_localappdata_defaults_under_home() -> None:
    (target,) = loc.targets("win32", {}, WIN_HOME, Scope.USER, ["chrome"])
    assert str(target.manifest_path).startswith(r"C:\Users\ann\AppData\Local\pedelec-native-host")


def test_windows_lookup_order_is_hive_then_32_then_64_bit_view_then_vendor() -> None:
    """Chromium's FindManifest: HKCU then HKLM; in each, the 32-bit view, then the 64-bit
    one; in each view, Edge's key, then Chromium's, then Chrome's."""
    order = loc.lookup_order("win32", WIN_ENV, WIN_HOME, "edge")
    vendors = [r"Software\Microsoft\Edge", r"Software\Chromium", r"Software\Google\Chrome"]
    assert [t.registry_key for t in order] == [
        RegistryKey(hive, f"{vendor}\\{KEY_TAIL}", view)
        for hive in ("HKCU", "HKLM")
        for view in (RegistryView.WOW64_32, RegistryView.WOW64_64)
        for vendor in vendors
    ]
    assert str(order[0].registry_key) == f"HKCU\\{vendors[0]}\\{KEY_TAIL} (32-bit view)"
    assert [t.scope for t in order] == [Scope.USER] * 6 + [Scope.SYSTEM] * 6


def test_posix_lookup_order_is_user_then_system() -> None:
    order = loc.lookup_order("darwin", {}, MAC_HOME, "brave")
    assert [t.scope for t in order] == [Scope.USER, Scope.USER, Scope.SYSTEM]


def test_every_row_has_what_its_platform_needs() -> None:
    names_seen: set[tuple[str, str]] = set()
    for row in loc.TABLE:
        assert (row.os, row.name) not in names_seen, f"duplicate row {row.name} on {row.os}"
        names_seen.add((row.os, row.name))
        if row.os is loc.Os.WIN32:
            assert row.registry_vendor and row.registry_vendor in row.registry_lookup
        elif row.sandbox is loc.Sandbox.NONE:
            assert row.system_dirs and all(d.startswith("/") for d in row.system_dirs)
        else:  # a sandbox sees no system directory of the host
            assert row.os is loc.Os.LINUX and row.sandbox_id and not row.system_dirs
    for platform in ("linux", "darwin", "win32"):
        names = tuple(row.name for row in loc.rows_for(platform))
        assert {"chrome", "chrome-beta", "chrome-dev", "chrome-canary", "chromium", "edge"} <= set(
            names
        )
        assert "brave" in names and "vivaldi" in names
    assert "arc" in tuple(row.name for row in loc.rows_for("darwin"))
    assert "arc" not in tuple(row.name for row in loc.rows_for("linux"))


def test_unknown_browser_and_platform_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown browser firefox"):
        loc.targets("linux", {}, HOME, Scope.USER, ["firefox"])
    with pytest.raises(ValueError, match="arc"):
        loc.targets("linux", {}, HOME, Scope.USER, ["arc"])
    with pytest.raises(loc.UnsupportedPlatformError):
        loc.normalize_platform("sunos5")
    assert loc.normalize_platform("linux2") is loc.Os.LINUX
    assert loc.normalize_platform("freebsd14") is loc.Os.LINUX


def test_all_selects_every_row_once() -> None:
    every = loc.targets("linux", {}, HOME, Scope.USER, ["all"])
    rows = loc.rows_for("linux")
    assert [t.browser for t in every] == [r.name for r in rows if r.sandbox is not loc.Sandbox.SNAP]


# --- sandboxed browsers (Linux) --------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "app_id", "subdir"),
    [
        ("chrome-flatpak", "com.google.Chrome", "google-chrome"),
        ("chrome-dev-flatpak", "com.google.ChromeDev", "google-chrome-unstable"),
        ("chromium-flatpak", "org.chromium.Chromium", "chromium"),
        (
            "ungoogled-chromium-flatpak",
            "io.github.ungoogled_software.ungoogled_chromium",
            "chromium",
        ),
        ("edge-flatpak", "com.microsoft.Edge", "microsoft-edge"),
        ("brave-flatpak", "com.brave.Browser", "BraveSoftware/Brave-Browser"),
        ("vivaldi-flatpak", "com.vivaldi.Vivaldi", "vivaldi"),
    ],
)
def test_flatpak_rows_read_their_own_var_app_config(name: str, app_id: str, subdir: str) -> None:
    """XDG_CONFIG_HOME does not move a Flatpak's dirs: the sandbox remaps it itself."""
    (target,) = loc.targets("linux", {"XDG_CONFIG_HOME": "/xdg"}, HOME, Scope.USER, [name])
    root = f"/home/ann/.var/app/{app_id}"
    assert str(target.manifest_path) == f"{root}/config/{subdir}/NativeMessagingHosts/{MANIFEST}"
    assert (target.sandbox, target.sandbox_id) == (loc.Sandbox.FLATPAK, app_id)
    assert loc.targets("linux", {}, HOME, Scope.SYSTEM, [name]) == []
    assert str(loc.flatpak_wrapper_path(HOME, app_id)).startswith(f"{root}/")


@pytest.mark.parametrize("name", ["chromium-snap", "brave-snap", "vivaldi-snap"])
def test_snap_rows_have_nothing_to_register(name: str) -> None:
    (row,) = loc.select_rows("linux", [name])
    snap = name.removesuffix("-snap")
    assert loc.row_user_data_dir(row, {}, HOME) == PurePosixPath(f"/home/ann/snap/{snap}")
    for scope in Scope:
        assert loc.targets("linux", {}, HOME, scope, [name]) == []
    assert loc.lookup_order("linux", {}, HOME, name) == []


def test_sandboxed_rows_are_linux_only() -> None:
    for platform in ("darwin", "win32"):
        assert not [
            n
            for n in tuple(row.name for row in loc.rows_for(platform))
            if n.endswith(("-flatpak", "-snap"))
        ]


def test_flatpak_override_paths_follow_xdg_data_home() -> None:
    assert [str(p) for p in loc.flatpak_override_paths({}, HOME, "com.google.Chrome")] == [
        "/home/ann/.local/share/flatpak/overrides/com.google.Chrome",
        "/var/lib/flatpak/overrides/com.google.Chrome",
    ]
    custom = loc.flatpak_override_paths({"XDG_DATA_HOME": "/data"}, HOME, "com.brave.Browser")
    assert str(custom[0]) == "/data/flatpak/overrides/com.brave.Browser"


def test_pedelec_desktops_own_registration() -> None:
    """Spec 5.1: the Desktop copies its host to ~/.pedelec and registers it on macOS and
    Windows only."""
    assert [str(p) for p in loc.desktop_host_paths("linux", {}, HOME)] == [
        "/home/ann/.pedelec/pedelec-native-host"
    ]
    assert [str(p) for p in loc.desktop_host_paths("win32", {}, WIN_HOME)] == [
        r"C:\Users\ann\.pedelec\pedelec-native-host.exe"
    ]
    moved = loc.desktop_host_paths("darwin", {"PEDELEC_HOME": "/p"}, MAC_HOME)
    assert [str(p) for p in moved] == [
        "/Users/ann/.pedelec/pedelec-native-host",
        "/p/pedelec-native-host",
    ]
    assert str(loc.desktop_manifest_path("win32", WIN_HOME)) == (
        r"C:\Users\ann\.pedelec\cc.isaaclin.pedelec.json"
    )
    assert str(loc.desktop_manifest_path("darwin", MAC_HOME)) == (
        f"/Users/ann/Library/Application Support/Google/Chrome/NativeMessagingHosts/{MANIFEST}"
    )
    assert loc.desktop_manifest_path("linux", HOME) is None


def test_custom_user_data_dir_reads_nativemessaginghosts_not_default() -> None:
    target = loc.custom_target(PurePosixPath("/tmp/profile"))
    assert str(target.manifest_path) == f"/tmp/profile/NativeMessagingHosts/{MANIFEST}"
    assert target.user_data_dir is None


def test_home_from_env() -> None:
    assert loc.home_from_env({"HOME": "/h"}, "linux") == PurePosixPath("/h")
    assert loc.home_from_env({"USERPROFILE": r"C:\Users\b", "HOME": "/h"}, "win32") == (
        PureWindowsPath(r"C:\Users\b")
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abcdefghijklmnopabcdefghijklmnop", "abcdefghijklmnopabcdefghijklmnop"),
        (" abcdefghijklmnopabcdefghijklmnop ", "abcdefghijklmnopabcdefghijklmnop"),
        (
            "chrome-extension://abcdefghijklmnopabcdefghijklmnop/",
            "abcdefghijklmnopabcdefghijklmnop",
        ),
    ],
)
def test_extension_ids_are_normalised(value: str, expected: str) -> None:
    assert loc.normalize_extension_id(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", "abc", "abcdefghijklmnopabcdefghijklmnoq", "ABCDEFGHIJKLMNOPABCDEFGHIJKLMNOP", "*"],
)
def test_invalid_extension_ids_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="not an extension id"):
        loc.normalize_extension_id(value)


def test_allowed_origins_put_the_official_origin_first_once() -> None:
    extra = "abcdefghijklmnopabcdefghijklmnop"
    assert loc.allowed_origins([extra, OFFICIAL_EXTENSION_ID, extra]) == [
        f"chrome-extension://{OFFICIAL_EXTENSION_ID}/",
        f"chrome-extension://{extra}/",
    ]
