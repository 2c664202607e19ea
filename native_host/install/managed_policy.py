"""Managed browser policies that decide whether a browser may start this host at all.

Three policies matter (Chrome's enterprise policies, shared by Chromium, Edge and Brave):
- `NativeMessagingBlocklist`: host names the browser refuses; `*` refuses every host;
- `NativeMessagingAllowlist`: names exempt from the block list;
- `NativeMessagingUserLevelHosts`: false means only system-level manifests count.

A blocked host gets "Access to the native messaging host was disabled by the system
administrator."; with user-level hosts off, a user-level manifest is simply not found.

Where each browser reads them is a table (`SOURCES`): a directory of JSON files on Linux,
a managed-preferences plist on macOS, registry keys on Windows. Reading goes through a
`root` directory and a registry object so every OS is testable on Linux.
"""

from __future__ import annotations

import json
import plistlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Protocol

from native_host import HOST_NAME
from native_host.install.locations import Os, RegistryKey

BLOCKLIST = "NativeMessagingBlocklist"
ALLOWLIST = "NativeMessagingAllowlist"
USER_LEVEL = "NativeMessagingUserLevelHosts"
POLICY_NAMES = (BLOCKLIST, ALLOWLIST, USER_LEVEL)
BLOCKED_SYMPTOM = '"Access to the native messaging host was disabled by the system administrator."'
MAX_POLICY_FILE_BYTES = 4 * 1_048_576


class Permission(StrEnum):
    """What the browser allows this host (Chromium's `PolicyPermission`)."""

    ALLOW_ALL = "allowed"
    SYSTEM_ONLY = "system-level only"
    DISALLOW = "blocked"


@dataclass(frozen=True)
class Source:
    """Where one browser family reads its managed policies on one OS."""

    family: str
    os: Os
    where: tuple[str, ...]
    """Linux: managed JSON dirs; macOS: bundle ids; Windows: `SOFTWARE\\Policies\\...` keys."""


SOURCES: tuple[Source, ...] = (
    Source("chrome", Os.LINUX, ("/etc/opt/chrome/policies/managed",)),
    Source("chromium", Os.LINUX, ("/etc/chromium/policies/managed",)),
    Source("edge", Os.LINUX, ("/etc/opt/edge/policies/managed",)),
    Source("brave", Os.LINUX, ("/etc/brave/policies/managed",)),
    Source("chrome", Os.DARWIN, ("com.google.Chrome",)),
    Source("chromium", Os.DARWIN, ("org.chromium.Chromium",)),
    Source("edge", Os.DARWIN, ("com.microsoft.Edge",)),
    Source("brave", Os.DARWIN, ("com.brave.Browser",)),
    Source("chrome", Os.WIN32, (r"SOFTWARE\Policies\Google\Chrome",)),
    Source("chromium", Os.WIN32, (r"SOFTWARE\Policies\Chromium",)),
    Source("edge", Os.WIN32, (r"SOFTWARE\Policies\Microsoft\Edge",)),
    Source("brave", Os.WIN32, (r"SOFTWARE\Policies\BraveSoftware\Brave",)),
)
"""Vivaldi, Arc and the sandboxed builds have no known location here: not checked."""

MAC_MANAGED_PREFERENCES = "/Library/Managed Preferences"
WINDOWS_POLICY_HIVES = ("HKLM", "HKCU")
"""Machine policy wins over user policy."""


class PolicyRegistry(Protocol):
    """Reading the values of a registry key (faked in tests)."""

    def read_values(self, key: RegistryKey) -> Mapping[str, object] | None: ...


@dataclass
class Settings:
    """The three policies as found, each with where it was set."""

    values: dict[str, object] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """Policy sources that exist but could not be read."""

    def offer(self, name: str, value: object, where: str) -> None:
        """The first source to set a policy wins (the table lists them by precedence)."""
        if name in POLICY_NAMES and name not in self.values:
            self.values[name] = value
            self.origin[name] = where

    def names(self, name: str) -> list[str]:
        value = self.values.get(name)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def evaluate(settings: Settings, host: str = HOST_NAME) -> Permission:
    """Chromium's rule: blocked (by name or `*`) unless allow-listed; else user level
    only when `NativeMessagingUserLevelHosts` is false."""
    blocked = settings.names(BLOCKLIST)
    if ("*" in blocked or host in blocked) and host not in settings.names(ALLOWLIST):
        return Permission.DISALLOW
    if settings.values.get(USER_LEVEL) is False:
        return Permission.SYSTEM_ONLY
    return Permission.ALLOW_ALL


def explain(settings: Settings, permission: Permission) -> str:
    """Which policy decided, and where it is set."""
    if permission is Permission.DISALLOW:
        return f"{HOST_NAME} is blocked by {BLOCKLIST} ({settings.origin[BLOCKLIST]})"
    if permission is Permission.SYSTEM_ONLY:
        return (
            f"{USER_LEVEL} is false ({settings.origin[USER_LEVEL]}): user-level manifests ignored"
        )
    if settings.values:
        return "set, but this host is allowed: " + ", ".join(
            f"{name} ({where})" for name, where in settings.origin.items()
        )
    return "no managed policy restricts native messaging"


@dataclass(frozen=True)
class PolicyReader:
    """Reads the managed policies of one browser family on one OS."""

    os: Os
    root: Path = Path("/")
    """Prefix of absolute policy paths (tests point it at a simulated file system)."""
    user: str = ""
    """The macOS user whose per-user managed preferences apply."""
    registry_factory: Callable[[], PolicyRegistry] | None = None

    def sources(self, family: str) -> Sequence[Source]:
        return [s for s in SOURCES if s.os is self.os and s.family == family]

    def read(self, family: str) -> Settings | None:
        """The family's policies; None when this OS has no known location for it."""
        sources = self.sources(family)
        if not sources:
            return None
        settings = Settings()
        for source in sources:
            for where in source.where:
                if self.os is Os.LINUX:
                    self._read_json_dir(where, settings)
                elif self.os is Os.DARWIN:
                    self._read_plists(where, settings)
                else:
                    self._read_registry(where, settings)
        return settings

    def _local(self, absolute: str) -> Path:
        return self.root / PurePosixPath(absolute).relative_to("/")

    def _read_json_dir(self, directory: str, settings: Settings) -> None:
        """Every `*.json` in the managed directory, in name order (Chrome merges them)."""
        local = self._local(directory)
        try:
            names = sorted(p.name for p in local.iterdir() if p.name.endswith(".json"))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            settings.problems.append(f"{directory}: {exc.strerror or exc}")
            return
        for name in names:
            shown = f"{directory}/{name}"
            try:
                data = json.loads((local / name).read_bytes()[:MAX_POLICY_FILE_BYTES])
            except (OSError, ValueError) as exc:
                settings.problems.append(f"{shown}: {exc}")
                continue
            if not isinstance(data, dict):
                settings.problems.append(f"{shown}: not a JSON object")
                continue
            for key, value in data.items():
                settings.offer(key, value, shown)

    def _read_plists(self, bundle_id: str, settings: Settings) -> None:
        """Computer-level managed preferences, then the user's own."""
        places = [f"{MAC_MANAGED_PREFERENCES}/{bundle_id}.plist"]
        if self.user:
            places.append(f"{MAC_MANAGED_PREFERENCES}/{self.user}/{bundle_id}.plist")
        for place in places:
            try:
                data = plistlib.loads(self._local(place).read_bytes()[:MAX_POLICY_FILE_BYTES])
            except FileNotFoundError:
                continue
            except (OSError, plistlib.InvalidFileException, ValueError) as exc:
                settings.problems.append(f"{place}: {exc}")
                continue
            if isinstance(data, dict):
                for key, value in data.items():
                    settings.offer(str(key), value, place)

    def _read_registry(self, path: str, settings: Settings) -> None:
        """`<key>` holds `NativeMessagingUserLevelHosts` (DWORD); the lists are subkeys
        whose values `1`, `2`, ... are the names (REG_SZ)."""
        if self.registry_factory is None:
            return
        registry = self.registry_factory()
        for hive in WINDOWS_POLICY_HIVES:
            key = RegistryKey(hive, path)
            values = registry.read_values(key) or {}
            if USER_LEVEL in values:
                settings.offer(USER_LEVEL, values[USER_LEVEL] not in (0, "0", False), str(key))
            for name in (BLOCKLIST, ALLOWLIST):
                sub = RegistryKey(hive, f"{path}\\{name}")
                entries = registry.read_values(sub)
                if entries:
                    ordered = sorted(entries.items(), key=lambda kv: _index(kv[0]))
                    settings.offer(name, [str(v) for _, v in ordered], str(sub))


def _index(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)
