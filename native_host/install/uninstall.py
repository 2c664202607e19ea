"""`uninstall`: undo exactly what the install record says install wrote, and nothing else.

The record is read through `files.read_trusted`, and every path and key in it must be one
an install could have written (recomputed from the locations table: manifests of every
browser and scope, profile-root manifests, launchers, Flatpak wrappers and overrides, the
host's `config.json`). Anything else is refused and reported, never touched: a record that
names `~/.bashrc` deletes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath

from native_host import files, paths, startimage
from native_host.install import locations
from native_host.install.contents import launcher_name
from native_host.install.installer import Printer
from native_host.install.locations import Os, RegistryKey, Sandbox, Scope
from native_host.install.plan import (
    Environment,
    InstallError,
    as_local,
    file_mode,
    read_bytes,
    sha256,
)
from native_host.install.record import (
    FLATPAK_OVERRIDE,
    LAUNCHER,
    ConfigEntry,
    FileEntry,
    InstallRecord,
    RecordError,
    load_record,
    record_path,
)


def writable_files(ctx: Environment) -> set[Path]:
    """Every file an install on this machine could write (profile roots apart)."""
    result: set[Path] = set()
    for scope in Scope:
        for target in locations.targets(ctx.platform, ctx.env, ctx.home, scope):
            result.add(as_local(target.manifest_path))
        directory = (
            Path(paths.install_record_dir(ctx.env))
            if scope is Scope.USER
            else as_local(locations.launcher_dir(ctx.platform, ctx.env, ctx.home, scope))
        )
        result.add(directory / launcher_name(ctx.os))
        result.add(directory / startimage.IMAGE_NAME)
        if ctx.os is Os.WIN32:
            result.add(as_local(locations.windows_manifest_path(ctx.env, ctx.home, scope)))
    for row in locations.rows_for(ctx.platform):
        if row.sandbox is Sandbox.FLATPAK:
            result.add(as_local(locations.flatpak_wrapper_path(ctx.home, row.sandbox_id)))
            override = locations.flatpak_override_paths(ctx.env, ctx.home, row.sandbox_id)[0]
            result.add(as_local(override))
    return result


def writable_keys(ctx: Environment) -> set[RegistryKey]:
    """Every registry key an install could set, in either view."""
    return {
        target.registry_key.in_view(view)
        for scope in Scope
        for target in locations.targets(ctx.platform, ctx.env, ctx.home, scope)
        if target.registry_key is not None
        for view in locations.REGISTRY_VIEWS
    }


def _profile_manifest(path: PurePath) -> bool:
    """`<any profile root>/NativeMessagingHosts/cc.isaaclin.pedelec.json` (--user-data-dir)."""
    return path.name == locations.MANIFEST_FILE and path.parent.name == locations.NMH_SUBDIR


def _restore_or_remove(path: Path, entry: FileEntry, say: Printer, dry_run: bool) -> None:
    current = read_bytes(path)
    if current is None:
        say("missing", f"{entry.role} {path} (already gone)")
    elif sha256(current) != entry.sha256:
        say("kept", f"{entry.role} {path}: changed since install, not ours to delete")
    elif entry.previous is not None:
        say("restore", f"{entry.role} {path} (its content from before install)")
        if not dry_run:
            mode = entry.mode or file_mode(Scope.USER, executable=entry.role == LAUNCHER)
            files.atomic_write(path, entry.previous.encode(), mode)
    else:
        say("remove", f"{entry.role} {path}")
        if not dry_run:
            path.unlink()


def _undo_config(entry: ConfigEntry, say: Printer, dry_run: bool) -> None:
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
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        files.atomic_write(path, text.encode(), files.PRIVATE_FILE_MODE)


def _undo_keys(record: InstallRecord, ctx: Environment, say: Printer, dry_run: bool) -> int:
    """Restore or delete each recorded key; returns how many were refused."""
    allowed = writable_keys(ctx)
    refused = 0
    registry = ctx.registry_factory()
    for entry in record.registry:
        key = entry.registry_key
        if key not in allowed:
            say("refused", f"{key}: not a key install writes; left alone")
            refused += 1
            continue
        current = registry.get_default(key)
        if current != entry.value:
            say("kept", f"{key}: now {current!r}, not ours to delete")
        elif entry.previous is not None:
            say("restore", f"{key} = {entry.previous}")
            if not dry_run:
                registry.set_default(key, entry.previous)
        else:
            say("remove", str(key))
            if not dry_run:
                registry.delete(key)
    return refused


def uninstall(ctx: Environment, dry_run: bool = False) -> bool:
    """Undo what the record says install wrote; False when there was no record.

    Raises InstallError when the record cannot be trusted, or names a path or key no
    install writes (those are left alone; the rest is undone and the record kept)."""
    say = Printer(ctx.out, dry_run)
    rec_path = record_path(ctx.env)
    try:
        record = load_record(rec_path)
    except RecordError as exc:
        raise InstallError(str(exc)) from None
    if record is None:
        say("unchanged", f"nothing to uninstall (no record at {rec_path})")
        return False
    refused = _undo_keys(record, ctx, say, dry_run) if record.registry else 0
    allowed = writable_files(ctx)
    undone: list[Path] = []
    launchers = [e for e in record.files if e.role == LAUNCHER]
    for entry in [e for e in record.files if e.role != LAUNCHER] + launchers:
        path = Path(entry.path)
        ours = path in allowed or (
            entry.role not in (LAUNCHER, FLATPAK_OVERRIDE) and _profile_manifest(path)
        )
        if not ours or not path.is_absolute():
            say("refused", f"{path}: not a file install writes; left alone")
            refused += 1
            continue
        _restore_or_remove(path, entry, say, dry_run)
        undone.append(path)
    config_path = Path(paths.config_dir(ctx.env)) / paths.CONFIG_FILE
    if record.config is not None:
        if Path(record.config.path) == config_path:
            _undo_config(record.config, say, dry_run)
            undone.append(config_path)
        else:
            say("refused", f"{record.config.path}: not the host's config.json; left alone")
            refused += 1
    if refused:
        raise InstallError(
            f"the install record {rec_path} names {refused} path(s) no install writes; they "
            "were left alone and the record kept: check it, then remove it by hand"
        )
    say("remove", f"install record {rec_path}")
    if dry_run:
        return True
    rec_path.unlink()
    ancestors = {parent for path in [*undone, rec_path] for parent in path.parents}
    for directory in sorted(
        map(Path, record.created_dirs), key=lambda p: len(p.parts), reverse=True
    ):
        if directory not in ancestors:
            continue  # only directories that held what install wrote
        try:
            directory.rmdir()
        except OSError:
            continue
        say("remove", f"directory {directory}")
    return True
