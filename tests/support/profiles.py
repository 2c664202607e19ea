"""Browser user data dirs written by hand for doctor's extension checks, in the shape
Debian's Chromium 156 writes them (tests/fixtures/profiles/chromium-156-linux/ is a
recorded one): `Local State` listing the profiles, and per profile a `Preferences` whose
`extensions.settings` holds one entry per extension, and a `Secure Preferences` holding
only `protection.super_mac` (Linux keeps the settings in Preferences). 0700 directories
and 0600 files, as the browser makes them.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from native_host import OFFICIAL_EXTENSION_ID

E2E_EXTENSION = Path(__file__).resolve().parent.parent / "e2e" / "extension"
"""The test extension: MV3, nativeMessaging, a background.js naming cc.isaaclin.pedelec."""
WEB_STORE_UPDATE_URL = "https://clients2.google.com/service/update2/crx"


def _write(path: Path, document: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(json.dumps(document, separators=(",", ":")).encode())
    path.chmod(0o600)
    return path


def store_entry(
    version: str = "0.4.6", reasons: Sequence[int] = (), extension_id: str = OFFICIAL_EXTENSION_ID
) -> dict[str, Any]:
    """An extension the Chrome Web Store installed (location 1), the official one unless
    told otherwise; `reasons` are its disable reasons."""
    manifest = {
        "name": "Pedelec",
        "version": version,
        "manifest_version": 3,
        "permissions": ["nativeMessaging", "storage"],
        "background": {"service_worker": "background.js"},
        "update_url": WEB_STORE_UPDATE_URL,
    }
    return {
        "active_permissions": {"api": ["nativeMessaging", "storage"]},
        "disable_reasons": list(reasons),
        "from_webstore": True,
        "location": 1,
        "manifest": manifest,
        "path": f"{extension_id}/{version}_0",
    }


def unpacked_entry(folder: Path, reasons: Sequence[int] = (), location: int = 4) -> dict[str, Any]:
    """An unpacked extension (Load unpacked: 4, --load-extension: 8): no manifest in the
    entry, an absolute path, the permissions it was granted."""
    return {
        "active_permissions": {"api": ["nativeMessaging"]},
        "disable_reasons": list(reasons),
        "location": location,
        "path": str(folder),
    }


def extension_folder(
    destination: Path, name: str = "Pedelec", background: str | None = None
) -> Path:
    """A copy of the test extension's files (without its `key`) under `name`; with
    `background`, that text is its background.js instead."""
    shutil.copytree(E2E_EXTENSION, destination)
    manifest_path = destination / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.pop("key")
    manifest_path.write_text(json.dumps({**manifest, "name": name}))
    if background is not None:
        (destination / "background.js").write_text(background)
    return destination


def write_user_data(
    user_data_dir: Path,
    profiles: Mapping[str, Mapping[str, Mapping[str, Any]]],
    names: Mapping[str, str] | None = None,
) -> Path:
    """A user data dir: `profiles` maps each profile directory to its extension entries
    by id; `names` gives display names (default: `Person N`)."""
    user_data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    names = names or {}
    cache = {d: {"name": names.get(d, f"Person {i + 1}")} for i, d in enumerate(profiles)}
    _write(
        user_data_dir / "Local State",
        {"profile": {"info_cache": cache, "profiles_order": list(profiles)}},
    )
    for directory, entries in profiles.items():
        write_preferences(user_data_dir / directory, entries)
    return user_data_dir


def write_preferences(profile_dir: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """A profile's Preferences with these extension entries, and its Secure Preferences."""
    _write(profile_dir / "Preferences", {"extensions": {"settings": dict(entries)}})
    _write(profile_dir / "Secure Preferences", {"protection": {"super_mac": "0" * 64}})


def snapshot(directory: Path) -> dict[str, tuple[bytes | None, int, int, int]]:
    """Every entry under `directory` (symbolic links not followed): content (of files up
    to 4 MiB), size, mode and modification time in ns, to show that nothing was written."""
    paths = [directory]
    for folder, dirs, files in os.walk(directory):
        paths += [Path(folder, name) for name in [*dirs, *files]]
    found = {}
    for path in sorted(paths):
        info = path.lstat()
        regular = stat.S_ISREG(info.st_mode) and info.st_size <= 4 * 1_048_576
        content = path.read_bytes() if regular else None
        key = str(path.relative_to(directory))
        found[key] = (content, info.st_size, info.st_mode, info.st_mtime_ns)
    return found
