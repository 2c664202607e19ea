"""The install record: what `install` wrote, so `uninstall` removes exactly that and
`doctor` checks exactly that.

It lives in the user's private state directory and is read only through
`files.read_trusted` (ours, not writable by anyone else, not a symlink, bounded): a
record someone else could plant would let them choose what uninstall deletes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, ValidationError

from native_host import files, paths
from native_host.install.locations import RegistryKey, RegistryView
from native_host.models import CamelModel

RECORD_FILE = "install-record.json"
MAX_RECORD_BYTES = 1_048_576

# Roles of the files install writes.
LAUNCHER = "launcher"
START_IMAGE = "start image"
MANIFEST = "manifest"
FLATPAK_WRAPPER = "flatpak-wrapper"
FLATPAK_OVERRIDE = "flatpak-override"


class RecordError(Exception):
    """The record exists but cannot be trusted or parsed."""


class FileEntry(CamelModel):
    path: str
    role: str
    sha256: str
    browsers: list[str] = Field(default_factory=list)
    previous: str | None = None
    """Content that was there before the first install, restored by uninstall."""
    mode: int | None = None
    """The mode install gave the file (restores use it too)."""


class RegistryEntry(CamelModel):
    hive: str
    key: str
    value: str
    browsers: list[str] = Field(default_factory=list)
    previous: str | None = None
    view: RegistryView = RegistryView.WOW64_64
    """Records written before views were told apart used the 64-bit host Python's view."""

    @property
    def registry_key(self) -> RegistryKey:
        return RegistryKey(self.hive, self.key, self.view)


class ConfigEntry(CamelModel):
    path: str
    sha256: str
    added_ids: list[str] = Field(default_factory=list)
    created: bool = False


class InstallRecord(CamelModel):
    """What install wrote, so uninstall can remove exactly that."""

    version: int = 1
    files: list[FileEntry] = Field(default_factory=list)
    registry: list[RegistryEntry] = Field(default_factory=list)
    config: ConfigEntry | None = None
    created_dirs: list[str] = Field(default_factory=list)

    def file(self, path: Path) -> FileEntry | None:
        return next((e for e in self.files if e.path == str(path)), None)

    def key(self, key: RegistryKey) -> RegistryEntry | None:
        return next((e for e in self.registry if e.registry_key == key), None)


def record_path(env: Mapping[str, str]) -> Path:
    return Path(paths.install_record_dir(env)) / RECORD_FILE


def load_record(path: Path) -> InstallRecord | None:
    """The record, None when absent; `RecordError` when it is not trustworthy or valid."""
    try:
        raw = files.read_trusted(path, MAX_RECORD_BYTES)
    except files.FileRefusedError as exc:
        if exc.reason == files.MISSING:
            return None
        raise RecordError(f"install record refused: {exc.explanation}") from None
    try:
        return InstallRecord.model_validate_json(raw)
    except ValidationError as exc:
        raise RecordError(
            f"install record {path} is unreadable ({exc.errors()[0]['msg']}); "
            "move it away and remove registrations by hand"
        ) from None


def save_record(path: Path, record: InstallRecord) -> None:
    """Write the record privately (0600 in a 0700 directory), noting directories created;
    `RecordError` when its directory is not the user's alone."""
    for directory in missing_dirs(path.parent):
        if str(directory) not in record.created_dirs:
            record.created_dirs.append(str(directory))
    try:
        files.ensure_private_dir(path.parent)
    except files.FileRefusedError as exc:
        raise RecordError(f"cannot keep the install record: {exc.explanation}") from None
    data = record.model_dump_json(by_alias=True, indent=2).encode() + b"\n"
    files.atomic_write(path, data, files.PRIVATE_FILE_MODE)


def missing_dirs(directory: Path) -> list[Path]:
    """`directory` and its missing parents, outermost first."""
    missing: list[Path] = []
    probe = directory
    while not probe.exists() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    return list(reversed(missing))
