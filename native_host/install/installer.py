"""Write and remove host registrations: manifests, Windows registry keys, the launcher and
the extension ids in `config.json`, with a record so `uninstall` removes exactly that.

Install plans first (pure: what goes where) and applies second, so `--dry-run` prints the
same lines without touching anything. Every file is written atomically (temp + rename).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shlex
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Protocol, TextIO

from pydantic import Field, ValidationError

from native_host import HOST_NAME, paths
from native_host.install import locations
from native_host.install.locations import Os, RegistryKey, Scope, Target
from native_host.models import CamelModel

RECORD_FILE = "install-record.json"
MANIFEST_DESCRIPTION = "Pedelec native messaging host"
LAUNCHER_NAMES = {Os.LINUX: "pedelec-native-host", Os.DARWIN: "pedelec-native-host"}
WINDOWS_LAUNCHER = "pedelec-native-host.bat"
MANIFEST_MODE = 0o644
LAUNCHER_MODE = 0o755
DIR_MODE = 0o755


class InstallError(Exception):
    """A problem the user must fix before anything can be written."""


# --- registry -------------------------------------------------------------------
class Registry(Protocol):
    """The three registry operations install needs; faked in tests."""

    def get_default(self, key: RegistryKey) -> str | None: ...

    def set_default(self, key: RegistryKey, value: str) -> None: ...

    def delete(self, key: RegistryKey) -> None: ...


class WindowsRegistry:
    """`winreg`, imported on first use so this module loads on every platform."""

    def __init__(self) -> None:
        self._winreg: Any = importlib.import_module("winreg")

    def _hive(self, key: RegistryKey) -> Any:
        hives = {"HKCU": self._winreg.HKEY_CURRENT_USER, "HKLM": self._winreg.HKEY_LOCAL_MACHINE}
        return hives[key.hive]

    def get_default(self, key: RegistryKey) -> str | None:
        try:
            with self._winreg.OpenKey(self._hive(key), key.path) as handle:
                value, _kind = self._winreg.QueryValueEx(handle, "")
        except FileNotFoundError:
            return None
        return str(value)

    def set_default(self, key: RegistryKey, value: str) -> None:
        access = self._winreg.KEY_SET_VALUE
        with self._winreg.CreateKeyEx(self._hive(key), key.path, 0, access) as handle:
            self._winreg.SetValueEx(handle, "", 0, self._winreg.REG_SZ, value)

    def delete(self, key: RegistryKey) -> None:
        try:
            self._winreg.DeleteKey(self._hive(key), key.path)
        except FileNotFoundError:
            return


# --- the install record ---------------------------------------------------------
class FileEntry(CamelModel):
    path: str
    role: str
    sha256: str
    browsers: list[str] = Field(default_factory=list)
    previous: str | None = None
    """Content that was there before the first install, restored by uninstall."""


class RegistryEntry(CamelModel):
    hive: str
    key: str
    value: str
    browsers: list[str] = Field(default_factory=list)
    previous: str | None = None


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
        return next((e for e in self.registry if (e.hive, e.key) == (key.hive, key.path)), None)


def record_path(env: Mapping[str, str]) -> Path:
    return Path(paths.install_record_dir(env)) / RECORD_FILE


def load_record(path: Path) -> InstallRecord | None:
    """The record, None when absent; an unreadable record stops install and uninstall."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return InstallRecord.model_validate_json(raw)
    except ValidationError as exc:
        raise InstallError(
            f"install record {path} is unreadable ({exc.errors()[0]['msg']}); "
            "move it away and remove registrations by hand"
        ) from exc


# --- file helpers -----------------------------------------------------------------
def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write via a temp file in the same directory and `os.replace`: a browser starting
    at that moment sees the old manifest or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ensure_dir(path: Path) -> list[Path]:
    """Create `path` and missing parents; return the ones created, outermost first."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir(mode=DIR_MODE)
    return list(reversed(missing))


def as_local(path: PurePath) -> Path:
    """A target-flavoured path as a real one (identity on the platform it was made for)."""
    return Path(path.as_posix()) if not isinstance(path, Path) else path


# --- contents -------------------------------------------------------------------
def render_manifest(host_path: str, extra_ids: Sequence[str]) -> bytes:
    """The manifest (spec 1.3): official origin first, then each extra id."""
    manifest = {
        "name": HOST_NAME,
        "description": MANIFEST_DESCRIPTION,
        "path": host_path,
        "type": "stdio",
        "allowed_origins": locations.allowed_origins(extra_ids),
    }
    return (json.dumps(manifest, indent=2) + "\n").encode()


def launcher_text(os_name: Os, python: str) -> bytes:
    """A script Chrome can execute that runs this package with this interpreter."""
    if os_name is Os.WIN32:
        # In a batch file `%` must be doubled; a Windows path cannot contain `"`.
        return f'@"{python.replace("%", "%%")}" -m native_host %*\r\n'.encode()
    return (
        "#!/bin/sh\n"
        "# Written by `pedelec-native-host install`; Chrome runs this as the host.\n"
        f'exec {shlex.quote(python)} -m native_host "$@"\n'
    ).encode()


# --- planning -------------------------------------------------------------------
@dataclass(frozen=True)
class InstallOptions:
    browsers: tuple[str, ...] | None = None
    """None: every browser whose user data dir exists; ("all",): every known one."""
    scope: Scope = Scope.USER
    extension_ids: tuple[str, ...] = ()
    host_path: Path | None = None
    user_data_dirs: tuple[Path, ...] = ()
    dry_run: bool = False


@dataclass
class Environment:
    """Everything install depends on outside its arguments, injectable for tests."""

    platform: str
    env: Mapping[str, str]
    home: PurePath
    executable: str
    frozen: bool
    registry_factory: Callable[[], Registry] = WindowsRegistry
    out: TextIO | None = None

    @property
    def os(self) -> Os:
        return locations.normalize_platform(self.platform)


@dataclass(frozen=True)
class FileWrite:
    path: Path
    data: bytes
    mode: int
    role: str
    browsers: tuple[str, ...]


@dataclass(frozen=True)
class KeyWrite:
    key: RegistryKey
    value: str
    browsers: tuple[str, ...]


@dataclass(frozen=True)
class ConfigWrite:
    path: Path
    data: bytes
    added_ids: tuple[str, ...]
    mode: int


@dataclass
class Plan:
    """Everything one install will write, in the order it is written."""

    launcher: FileWrite | None
    config: ConfigWrite | None
    manifests: list[FileWrite]
    keys: list[KeyWrite]
    warnings: list[str] = field(default_factory=list)


def _read_config(path: Path) -> dict[str, Any]:
    raw = read_bytes(path)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix or remove it first") from exc
    if not isinstance(data, dict):
        raise InstallError(f"{path} is not a JSON object; fix or remove it first")
    return data


def _config_ids(config: Mapping[str, Any], warnings: list[str]) -> list[str]:
    """Valid ids already in `allowedExtensionIds`: the manifest must allow them too."""
    value = config.get("allowedExtensionIds", [])
    if not isinstance(value, list):
        warnings.append("config.json allowedExtensionIds is not a list; ignored")
        return []
    ids: list[str] = []
    for item in value:
        try:
            ids.append(locations.normalize_extension_id(str(item)))
        except ValueError:
            warnings.append(f"config.json allowedExtensionIds entry {item!r} is not an id; skipped")
    return ids


def select_targets(options: InstallOptions, ctx: Environment) -> list[Target]:
    """Explicit browsers and profile roots, else every browser that is installed."""
    os_name = ctx.os
    if options.user_data_dirs and os_name is Os.WIN32:
        raise InstallError("--user-data-dir has no effect on Windows: Chrome reads the registry")
    chosen: list[Target] = [locations.custom_target(d.absolute()) for d in options.user_data_dirs]
    names: Iterable[str] | None = options.browsers
    if names is None and options.user_data_dirs:
        return chosen
    try:
        every = locations.targets(ctx.platform, ctx.env, ctx.home, options.scope, names)
    except ValueError as exc:
        raise InstallError(str(exc)) from exc
    if names is None:
        every = [t for t in every if t.user_data_dir and as_local(t.user_data_dir).is_dir()]
        if not every:
            looked = ", ".join(
                f"{row.name} ({locations.row_user_data_dir(row, ctx.env, ctx.home)})"
                for row in locations.rows_for(ctx.platform)
            )
            raise InstallError(
                f"no installed browser found (looked for {looked}); "
                "pass --browser NAME, --browser all or --user-data-dir DIR"
            )
    return chosen + every


def _host_path(options: InstallOptions, ctx: Environment) -> tuple[str, FileWrite | None]:
    """What the manifest's `path` points at, and the launcher to write for it, if any."""
    if options.host_path is not None:
        host = options.host_path.absolute()
        if not host.is_file():
            raise InstallError(f"--host-path {host} is not an existing file")
        if ctx.os is not Os.WIN32 and not os.access(host, os.X_OK):
            raise InstallError(f"--host-path {host} is not executable (chmod 755 it)")
        return str(host), None
    if ctx.frozen:
        return ctx.executable, None
    if options.scope is Scope.USER:
        directory = Path(paths.install_record_dir(ctx.env))
    else:
        directory = as_local(locations.launcher_dir(ctx.platform, ctx.env, ctx.home, Scope.SYSTEM))
    name = WINDOWS_LAUNCHER if ctx.os is Os.WIN32 else LAUNCHER_NAMES[ctx.os]
    launcher = directory / name
    write = FileWrite(
        launcher, launcher_text(ctx.os, ctx.executable), LAUNCHER_MODE, "launcher", ()
    )
    return str(launcher), write


def plan_install(options: InstallOptions, ctx: Environment) -> Plan:
    """Decide every write without performing any."""
    new_ids = []
    for value in options.extension_ids:
        try:
            new_ids.append(locations.normalize_extension_id(value))
        except ValueError as exc:
            raise InstallError(str(exc)) from exc
    warnings: list[str] = []
    config_path = Path(paths.config_dir(ctx.env)) / paths.CONFIG_FILE
    config = _read_config(config_path)
    existing_ids = _config_ids(config, warnings)
    added = [i for i in dict.fromkeys(new_ids) if i not in existing_ids]
    config_write = None
    if added:
        merged = dict(config)
        before = config.get("allowedExtensionIds", [])
        merged["allowedExtensionIds"] = [*(before if isinstance(before, list) else []), *added]
        mode = stat.S_IMODE(config_path.stat().st_mode) if config_path.exists() else 0o644
        data = (json.dumps(merged, indent=2, ensure_ascii=False) + "\n").encode()
        config_write = ConfigWrite(config_path, data, tuple(added), mode)

    chosen = select_targets(options, ctx)
    host, launcher = _host_path(options, ctx)
    manifest = render_manifest(host, [*existing_ids, *added])
    by_path: dict[Path, list[str]] = {}
    keys: dict[RegistryKey, list[str]] = {}
    for target in chosen:
        by_path.setdefault(as_local(target.manifest_path), []).append(target.browser)
        if target.registry_key is not None:
            keys.setdefault(target.registry_key, []).append(target.browser)
    manifests = [
        FileWrite(p, manifest, MANIFEST_MODE, "manifest", tuple(dict.fromkeys(b)))
        for p, b in by_path.items()
    ]
    key_writes = [
        KeyWrite(
            k,
            str(locations.windows_manifest_path(ctx.env, ctx.home, options.scope)),
            tuple(dict.fromkeys(b)),
        )
        for k, b in keys.items()
    ]
    return Plan(launcher, config_write, manifests, key_writes, warnings)


# --- applying -------------------------------------------------------------------
_PAST = {
    "write": "wrote",
    "set": "set",
    "update": "updated",
    "remove": "removed",
    "restore": "restored",
}


class _Printer:
    """One line per file or key, so the user can see (and undo) every change.

    Verbs of a change come in the present tense and print as "would <verb>" in a dry
    run, in the past tense otherwise; status words (unchanged, kept, ...) print as is.
    """

    def __init__(self, out: TextIO | None, dry_run: bool) -> None:
        self.out = out
        self.dry_run = dry_run

    def __call__(self, verb: str, what: str) -> None:
        if self.out is None:
            return
        if verb in _PAST:
            verb = f"would {verb}" if self.dry_run else _PAST[verb]
        self.out.write(f"{verb:<15} {what}\n")


def _browsers(names: Sequence[str]) -> str:
    return f" ({', '.join(names)})" if names else ""


def _apply_file(write: FileWrite, record: InstallRecord, say: _Printer, dry_run: bool) -> None:
    current = read_bytes(write.path)
    entry = record.file(write.path)
    label = f"{write.role} {write.path}{_browsers(write.browsers)}"
    same_mode = current is not None and stat.S_IMODE(write.path.stat().st_mode) == write.mode
    if current == write.data and same_mode:
        say("unchanged", label)
    else:
        say("write", label)
        if not dry_run:
            record.created_dirs.extend(
                str(d) for d in ensure_dir(write.path.parent) if str(d) not in record.created_dirs
            )
            atomic_write(write.path, write.data, write.mode)
    if dry_run:
        return
    previous: str | None = None
    if (
        entry is not None
        and current is not None
        and sha256(current)
        in (
            entry.sha256,
            sha256(write.data),
        )
    ):
        previous = entry.previous  # still ours: keep what was there before the first install
    elif current is not None and current != write.data:
        previous = current.decode("utf-8", errors="replace")  # someone else's, replaced now
    if entry is not None:
        record.files.remove(entry)
    record.files.append(
        FileEntry(
            path=str(write.path),
            role=write.role,
            sha256=sha256(write.data),
            browsers=list(write.browsers),
            previous=previous,
        )
    )


def _apply_key(
    write: KeyWrite, registry: Registry, record: InstallRecord, say: _Printer, dry_run: bool
) -> None:
    current = registry.get_default(write.key)
    entry = record.key(write.key)
    label = f"{write.key} = {write.value}{_browsers(write.browsers)}"
    if current == write.value:
        say("unchanged", label)
    else:
        say("set", label)
        if not dry_run:
            registry.set_default(write.key, write.value)
    if dry_run:
        return
    previous = entry.previous if entry else (current if current != write.value else None)
    if entry is not None:
        record.registry.remove(entry)
    record.registry.append(
        RegistryEntry(
            hive=write.key.hive,
            key=write.key.path,
            value=write.value,
            browsers=list(write.browsers),
            previous=previous,
        )
    )


def _apply_config(write: ConfigWrite, record: InstallRecord, say: _Printer, dry_run: bool) -> None:
    existed = write.path.exists()
    say(
        "update" if existed else "write",
        f"config {write.path} (allowedExtensionIds + {', '.join(write.added_ids)})",
    )
    if dry_run:
        return
    record.created_dirs.extend(
        str(d) for d in ensure_dir(write.path.parent) if str(d) not in record.created_dirs
    )
    atomic_write(write.path, write.data, write.mode)
    previous = record.config
    created = previous.created if previous and previous.path == str(write.path) else not existed
    earlier = previous.added_ids if previous and previous.path == str(write.path) else []
    record.config = ConfigEntry(
        path=str(write.path),
        sha256=sha256(write.data),
        added_ids=list(dict.fromkeys([*earlier, *write.added_ids])),
        created=created,
    )


def install(options: InstallOptions, ctx: Environment) -> Plan:
    """Plan, then write each file and key (unless dry run), keeping the record current even
    when a later write fails."""
    plan = plan_install(options, ctx)
    say = _Printer(ctx.out, options.dry_run)
    for warning in plan.warnings:
        say("warning", warning)
    rec_path = record_path(ctx.env)
    record = load_record(rec_path) or InstallRecord()
    registry = ctx.registry_factory() if plan.keys else None
    try:
        if plan.launcher is not None:
            _apply_file(plan.launcher, record, say, options.dry_run)
        if plan.config is not None:
            _apply_config(plan.config, record, say, options.dry_run)
        for write in plan.manifests:
            _apply_file(write, record, say, options.dry_run)
        for key in plan.keys:
            assert registry is not None
            _apply_key(key, registry, record, say, options.dry_run)
    finally:
        if not options.dry_run:
            _save_record(rec_path, record)
    return plan


def _save_record(path: Path, record: InstallRecord) -> None:
    created = ensure_dir(path.parent)
    record.created_dirs.extend(str(d) for d in created if str(d) not in record.created_dirs)
    data = record.model_dump_json(by_alias=True, indent=2).encode() + b"\n"
    atomic_write(path, data, 0o644)


# --- uninstall ------------------------------------------------------------------
def _restore_or_remove(path: Path, entry: FileEntry, say: _Printer, dry_run: bool) -> None:
    current = read_bytes(path)
    if current is None:
        say("missing", f"{entry.role} {path} (already gone)")
    elif sha256(current) != entry.sha256:
        say("kept", f"{entry.role} {path}: changed since install, not ours to delete")
    elif entry.previous is not None:
        say("restore", f"{entry.role} {path} (its content from before install)")
        if not dry_run:
            mode = LAUNCHER_MODE if entry.role == "launcher" else MANIFEST_MODE
            atomic_write(path, entry.previous.encode(), mode)
    else:
        say("remove", f"{entry.role} {path}")
        if not dry_run:
            path.unlink()


def _undo_config(entry: ConfigEntry, say: _Printer, dry_run: bool) -> None:
    path = Path(entry.path)
    current = read_bytes(path)
    if current is None:
        say("missing", f"config {path} (already gone)")
        return
    if entry.created and sha256(current) == entry.sha256:
        say("remove", f"config {path}")
        if not dry_run:
            path.unlink()
        return
    try:
        data = json.loads(current)
    except ValueError:
        data = None
    ids = data.get("allowedExtensionIds") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(ids, list):
        say(
            "kept",
            f"config {path}: changed since install and not editable; "
            f"remove {', '.join(entry.added_ids)} from allowedExtensionIds by hand",
        )
        return
    remaining = [i for i in ids if i not in entry.added_ids]
    if remaining == ids:
        say("unchanged", f"config {path}")
        return
    say("update", f"config {path} (allowedExtensionIds - {', '.join(entry.added_ids)})")
    if not dry_run:
        data["allowedExtensionIds"] = remaining
        mode = stat.S_IMODE(path.stat().st_mode)
        atomic_write(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(), mode)


def uninstall(ctx: Environment, dry_run: bool = False) -> bool:
    """Undo what the record says install wrote; returns False when there was no record."""
    say = _Printer(ctx.out, dry_run)
    rec_path = record_path(ctx.env)
    record = load_record(rec_path)
    if record is None:
        say("unchanged", f"nothing to uninstall (no record at {rec_path})")
        return False
    if record.registry:
        registry = ctx.registry_factory()
        for key_entry in record.registry:
            key = RegistryKey(key_entry.hive, key_entry.key)
            current = registry.get_default(key)
            if current != key_entry.value:
                say("kept", f"{key}: now {current!r}, not ours to delete")
            elif key_entry.previous is not None:
                say("restore", f"{key} = {key_entry.previous}")
                if not dry_run:
                    registry.set_default(key, key_entry.previous)
            else:
                say("remove", str(key))
                if not dry_run:
                    registry.delete(key)
    launchers = [e for e in record.files if e.role == "launcher"]
    for entry in [e for e in record.files if e.role != "launcher"] + launchers:
        _restore_or_remove(Path(entry.path), entry, say, dry_run)
    if record.config is not None:
        _undo_config(record.config, say, dry_run)
    if dry_run:
        say("remove", f"install record {rec_path}")
        return True
    rec_path.unlink()
    say("remove", f"install record {rec_path}")
    for directory in sorted(
        map(Path, record.created_dirs), key=lambda p: len(p.parts), reverse=True
    ):
        try:
            directory.rmdir()
        except OSError:
            continue
        say("remove", f"directory {directory}")
    return True


def default_environment(out: TextIO | None) -> Environment:
    """The real machine: this platform, environment, home and interpreter."""
    import sys

    return Environment(
        platform=sys.platform,
        env=os.environ,
        home=locations.home_from_env(os.environ, sys.platform),
        executable=sys.executable,
        frozen=bool(getattr(sys, "frozen", False)),
        out=out,
    )


__all__ = [
    "Environment",
    "InstallError",
    "InstallOptions",
    "Plan",
    "Registry",
    "WindowsRegistry",
    "install",
    "plan_install",
    "render_manifest",
    "uninstall",
]
