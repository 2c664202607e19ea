"""What a Chromium user data dir records about its profiles and their extensions, parsed
from the bytes of its files. Pure: no file access (`extensions` reads the files).

The facts, from Chromium's sources (and checked against the files Debian's Chromium 156
writes, tests/fixtures/profiles/):
- `Local State` (in the user data dir) lists the profiles under `profile.info_cache`:
  a dict from profile directory name (`Default`, `Profile 1`, ...) to attributes, the
  display `name` among them; `profile.profiles_order` is the order the profile picker
  shows (chrome/common/pref_names.h, `kProfileAttributes`, `kProfilesOrder`).
- Each profile keeps one dict per extension id under `extensions.settings`
  (extensions/browser/pref_names.cc, `kExtensions`), in `Preferences` or, where the
  browser protects it, in `Secure Preferences`: Windows and macOS enforce tracked
  preferences (`GetSettingsEnforcementGroup` in chrome/browser/prefs/
  chrome_pref_service_factory.cc returns GROUP_ENFORCE_DEFAULT there, NO_ENFORCEMENT
  elsewhere and on domain-joined Windows), and `extensions.settings` is a tracked pref.
- An entry is an installed extension when it has an integer `location` and a string
  `path` and is not a component of the browser (`GetInstalledInfoHelper` in
  extensions/browser/extension_prefs.cc). `path` is absolute for unpacked extensions
  and relative to the profile's `Extensions` directory otherwise; only packed
  extensions have their `manifest` copied into the entry (`PopulateExtensionInfoPrefs`:
  "don't cache their manifest since it may change on disk").
- Disabled: `disable_reasons` is a list of DisableReason values in current Chromium
  (Chromium 156 writes `[1]` after `chrome.management.setEnabled(id, false)`); older
  versions wrote one integer bitmask of the same values and kept `state` (0 disabled,
  1 enabled, 2 an external extension the user uninstalled). `MaybeClearExtensionStatePref`
  reads `state` 0 without reasons as "disabled by the user"; we do too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from native_host import codec
from native_host.install.locations import EXTENSION_ID_RE, Os

LOCAL_STATE = "Local State"
PREFERENCES = "Preferences"
SECURE_PREFERENCES = "Secure Preferences"
EXTENSIONS_DIR = "Extensions"
"""Where packed extensions are unpacked, under the profile: `path` is relative to it
(`kInstallDirectoryName` in extensions/common/constants.cc)."""
MANIFEST_JSON = "manifest.json"
DEFAULT_PROFILE = "Default"
NUMBERED_PROFILE = re.compile(r"^Profile [0-9]{1,6}$")
"""The directory names Chromium gives the profiles it creates (`Profile 1`, ...)."""

SETTINGS_FILES: Mapping[Os, tuple[str, ...]] = {
    Os.LINUX: (PREFERENCES, SECURE_PREFERENCES),
    Os.DARWIN: (SECURE_PREFERENCES, PREFERENCES),
    Os.WIN32: (SECURE_PREFERENCES, PREFERENCES),
}
"""Both files are read; an extension found in both is taken from the first file named
here, the one the browser of that system keeps `extensions.settings` in (Secure
Preferences where tracked preferences are enforced; a domain-joined Windows keeps them
in Preferences, which is then the only file that has them)."""


# --- where an extension came from: `location` (extensions/common/mojom/manifest.mojom) ----
INTERNAL = 1
UNPACKED = 4
COMPONENT = 5
COMMAND_LINE = 8
EXTERNAL_COMPONENT = 10
BROWSER_PARTS = frozenset({COMPONENT, EXTERNAL_COMPONENT})
"""Pieces of the browser itself (the PDF viewer, ...): never an extension the user has."""

LOCATIONS: Mapping[int, str] = {
    INTERNAL: "installed from a .crx file",
    2: "installed by another program",
    3: "installed by another program (Windows registry)",
    UNPACKED: "unpacked from {path}",
    6: "installed by another program from an update URL",
    7: "installed by policy",
    COMMAND_LINE: "unpacked from {path}, --load-extension",
    9: "installed by policy",
}
"""ManifestLocation values (kExternalPref 2, kExternalRegistry 3, kExternalPrefDownload 6,
kExternalPolicyDownload 7, kExternalPolicy 9) in words; an INTERNAL one is named by its
store when its update URL or `from_webstore` tells (STORES), an unpacked one by its
folder."""

STORES: Mapping[str, str] = {
    "clients2.google.com": "Chrome Web Store",
    "chromewebstore.google.com": "Chrome Web Store",
    "edge.microsoft.com": "Microsoft Edge Add-ons",
    "extension-updates.opera.com": "Opera add-ons",
}
"""A packed extension's store, by the host of the `update_url` its manifest names (the
browser adds the Web Store's when it installs from there)."""
WEB_STORE = "Chrome Web Store"


# --- why it is disabled: DisableReason (extensions/browser/disable_reason.h) --------------
@dataclass(frozen=True)
class DisableReason:
    """One DisableReason value, in the user's words, with what turns it back on."""

    value: int
    words: str
    fix: str


_TURN_ON = "turn it on at {page} in that profile"
DISABLE_REASONS: tuple[DisableReason, ...] = (
    DisableReason(1 << 0, "turned off by the user", _TURN_ON),
    DisableReason(
        1 << 1,
        "an update asks for new permissions that were not accepted",
        "accept its new permissions at {page} in that profile",
    ),
    DisableReason(1 << 2, "being reloaded", "wait a moment, or reload it at {page}"),
    DisableReason(1 << 3, "this browser lacks a feature it requires", "use a browser that has it"),
    DisableReason(1 << 4, "installed by another program and turned off (sideload)", _TURN_ON),
    DisableReason(1 << 5, "turned off on another device (sync)", _TURN_ON),
    DisableReason(
        1 << 8,
        "the browser could not verify where it came from",
        "reinstall it from the Chrome Web Store",
    ),
    DisableReason(1 << 9, "flagged by Safe Browsing", "reinstall it from the Chrome Web Store"),
    DisableReason(1 << 10, "its files are damaged", "repair or reinstall it at {page}"),
    DisableReason(1 << 11, "installed from another device and not approved yet", _TURN_ON),
    DisableReason(1 << 13, "installed by another program and not approved yet", _TURN_ON),
    DisableReason(
        1 << 14,
        "older than the version a policy requires",
        "update it at {page} (Update button in developer mode)",
    ),
    DisableReason(
        1 << 15, "waiting for a parent's approval", "ask the parent who manages this profile"
    ),
    DisableReason(1 << 16, "blocked by a policy", "ask the administrator of this browser"),
    DisableReason(
        1 << 18, "turned off remotely as malware", "reinstall it from the Chrome Web Store"
    ),
    DisableReason(1 << 19, "being reinstalled", "wait a moment, or reinstall it"),
    DisableReason(
        1 << 20,
        "not on Safe Browsing's allow-list (Enhanced Safe Browsing)",
        "keep it at {page} in that profile",
    ),
    DisableReason(1 << 21, "not on ChromeOS's keep-list", "ask the administrator of this browser"),
    DisableReason(
        1 << 22,
        "a policy requires extensions published in the store, and it is not",
        "ask the administrator of this browser",
    ),
    DisableReason(
        1 << 23,
        "its manifest version is no longer supported",
        "install a current version of the extension",
    ),
    DisableReason(
        1 << 24,
        "an unpacked extension while developer mode is off",
        "turn on Developer mode at {page} in that profile",
    ),
)
"""Every value `disable_reason.h` defines up to DISABLE_UNKNOWN (1 << 25, never written
to prefs); 1 << 6, 1 << 7, 1 << 12 and 1 << 17 were retired before it was."""
_REASONS_BY_VALUE = {reason.value: reason for reason in DISABLE_REASONS}

STATE_DISABLED = 0
STATE_UNINSTALLED = 2
"""The old `state` pref: 0 DISABLED, 1 ENABLED, 2 EXTERNAL_EXTENSION_UNINSTALLED (an entry
remembering that the user removed an externally installed extension), 3 a component."""
DISABLED_BY_USER = 1


class ProfileFileError(ValueError):
    """A profile file that is not what the browser writes; the text says why."""


@dataclass(frozen=True)
class ProfileEntry:
    """A profile of a user data dir: its directory name and display name."""

    directory: str
    name: str = ""

    @property
    def label(self) -> str:
        """`Default ("Your Chromium")`: the directory and the name the user knows it by."""
        return f'{self.directory} ("{self.name}")' if self.name else self.directory


@dataclass(frozen=True)
class ExtensionRecord:
    """What a profile's preferences say about one installed extension."""

    extension_id: str
    location: int
    path: str
    """As recorded: absolute for unpacked extensions, else relative to `Extensions/`."""
    disable_reasons: frozenset[int]
    manifest: Mapping[str, Any] | None
    """The manifest the browser copied into the entry (packed extensions only)."""
    api_permissions: frozenset[str] | None
    """The API permissions granted or active, None when the entry records neither."""
    from_webstore: bool

    @property
    def enabled(self) -> bool:
        return not self.disable_reasons

    def recorded_permissions(self) -> frozenset[str] | None:
        """The API permissions the entry records (its copied manifest's included); None
        when it records none, and only the extension's own manifest.json can tell."""
        copied = manifest_facts(self.manifest).permissions if self.manifest is not None else None
        if self.api_permissions is None:
            return copied
        return self.api_permissions | (copied or frozenset())


@dataclass(frozen=True)
class ManifestFacts:
    """What doctor needs from an extension's manifest."""

    name: str
    version: str
    permissions: frozenset[str]
    scripts: tuple[str, ...]
    """The background scripts it names, relative to the extension's directory."""
    update_url: str


def parse_document(data: bytes) -> dict[str, Any]:
    """A preferences file as a JSON object; ProfileFileError saying why it is not one."""
    try:
        document = codec.decode(data)
    except codec.InvalidJsonError as exc:
        raise ProfileFileError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ProfileFileError("not a JSON object")
    return document


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def is_profile_directory(name: object) -> bool:
    """A profile directory name a user data dir can hold: one plain path component."""
    if not isinstance(name, str) or not name or len(name) > 255:
        return False
    if name in (".", "..") or any(c in name for c in "/\\\0:"):
        return False
    return name.isprintable()


def profiles_from_local_state(document: Mapping[str, Any]) -> list[ProfileEntry]:
    """The profiles `Local State` lists, in the profile picker's order, then the rest."""
    profile = _dict(document.get("profile"))
    cache = _dict(profile.get("info_cache"))
    order = profile.get("profiles_order")
    ordered = [name for name in order if name in cache] if isinstance(order, list) else []
    names = list(dict.fromkeys([*ordered, *sorted(cache)]))
    return [
        ProfileEntry(name, printable(_dict(cache[name]).get("name", "")))
        for name in names
        if is_profile_directory(name)
    ]


def _api_permissions(entry: Mapping[str, Any]) -> frozenset[str] | None:
    found: set[str] | None = None
    for key in ("active_permissions", "granted_permissions"):
        api = _dict(entry.get(key)).get("api")
        if isinstance(api, list):
            found = (found or set()) | {p for p in api if isinstance(p, str)}
    return None if found is None else frozenset(found)


def _disable_reasons(entry: Mapping[str, Any]) -> frozenset[int]:
    """The list Chromium writes now, the bitmask it wrote before, and the old `state`."""
    value = entry.get("disable_reasons")
    reasons: set[int] = set()
    if isinstance(value, list):
        reasons = {v for v in value if type(v) is int and v > 0}
    elif type(value) is int and value > 0:
        reasons = {1 << bit for bit in range(value.bit_length()) if value >> bit & 1}
    if not reasons and entry.get("state") == STATE_DISABLED:
        reasons = {DISABLED_BY_USER}
    return frozenset(reasons)


def _record(extension_id: str, entry: Mapping[str, Any]) -> ExtensionRecord | None:
    location, path = entry.get("location"), entry.get("path")
    if type(location) is not int or not isinstance(path, str) or location in BROWSER_PARTS:
        return None
    if entry.get("state") == STATE_UNINSTALLED:
        return None
    manifest = entry.get("manifest")
    return ExtensionRecord(
        extension_id,
        location,
        path,
        _disable_reasons(entry),
        manifest if isinstance(manifest, dict) else None,
        _api_permissions(entry),
        entry.get("from_webstore") is True,
    )


def extension_records(document: Mapping[str, Any]) -> dict[str, ExtensionRecord]:
    """The installed extensions one preferences file records, by id."""
    settings = _dict(_dict(document.get("extensions")).get("settings"))
    records = {}
    for extension_id, entry in settings.items():
        if not EXTENSION_ID_RE.match(extension_id) or not isinstance(entry, dict):
            continue
        record = _record(extension_id, entry)
        if record is not None:
            records[extension_id] = record
    return records


def merge_records(
    by_file: Sequence[Mapping[str, ExtensionRecord]],
) -> dict[str, ExtensionRecord]:
    """One record per id from the files in SETTINGS_FILES order (the first one wins)."""
    merged: dict[str, ExtensionRecord] = {}
    for records in by_file:
        for extension_id, record in records.items():
            merged.setdefault(extension_id, record)
    return merged


def manifest_facts(manifest: Mapping[str, Any]) -> ManifestFacts:
    """Name, version, permissions and background scripts of a manifest (MV2 or MV3)."""
    background = _dict(manifest.get("background"))
    scripts: list[str] = []
    worker = background.get("service_worker")
    if isinstance(worker, str):
        scripts.append(worker)
    listed = background.get("scripts")
    if isinstance(listed, list):
        scripts.extend(s for s in listed if isinstance(s, str))
    listed_permissions = manifest.get("permissions")
    permissions = listed_permissions if isinstance(listed_permissions, list) else []
    name, version, update_url = (manifest.get(k) for k in ("name", "version", "update_url"))
    return ManifestFacts(
        printable(name) if isinstance(name, str) and not name.startswith("__MSG_") else "",
        printable(version, 40) if isinstance(version, str) else "",
        frozenset(p for p in permissions if isinstance(p, str)),
        tuple(scripts),
        update_url if isinstance(update_url, str) else "",
    )


def parse_manifest(data: bytes) -> ManifestFacts:
    """An extension's manifest.json; ProfileFileError when it is not a JSON object."""
    return manifest_facts(parse_document(data))


def names_host(data: bytes, host_name: str) -> bool:
    """Whether a script names the native host (as a string: `"cc.isaaclin.pedelec"`)."""
    name = host_name.encode()
    return any(quote + name + quote in data for quote in (b'"', b"'", b"`"))


def disable_reasons(values: Iterable[int]) -> list[DisableReason]:
    """The reasons in words, unknown values named by their number."""
    return [
        _REASONS_BY_VALUE.get(
            value, DisableReason(value, f"reason {value} (unknown to this doctor)", _TURN_ON)
        )
        for value in sorted(values)
    ]


def source(record: ExtensionRecord, facts: ManifestFacts | None) -> str:
    """Where the extension came from, in words: its store, unpacked, another program."""
    if record.location == INTERNAL:
        update_url = facts.update_url if facts else ""
        store = STORES.get(urlsplit(update_url).hostname or "")
        if store:
            return store
        return WEB_STORE if record.from_webstore else LOCATIONS[INTERNAL]
    words = LOCATIONS.get(record.location, f"location {record.location}")
    return words.format(path=printable(record.path, 200))


def printable(value: object, limit: int = 80) -> str:
    """Text from a profile or a manifest, safe to print: control characters replaced,
    at most `limit` characters."""
    if not isinstance(value, str):
        return ""
    text = "".join(c if c.isprintable() else "?" for c in value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
