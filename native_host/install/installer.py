"""Applying an install plan: write each file and key (atomically, private for the user
scope), note what was replaced (Pedelec Desktop's own registration included), grant
Flatpak permissions when asked, and keep the install record current throughout.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from native_host import __version__, files, versions
from native_host.install import flatpak, locations
from native_host.install.contents import (
    LAUNCHER_NAMES,
    WINDOWS_LAUNCHER,
    launcher_interpreter,
    launcher_text,
    render_manifest,
)
from native_host.install.locations import RegistryView, Scope
from native_host.install.plan import (
    MODES_KEPT,
    SYSTEM_DIR_MODE,
    ConfigWrite,
    Environment,
    FileWrite,
    Grant,
    InstallError,
    InstallOptions,
    KeyWrite,
    Plan,
    UsageError,
    as_local,
    file_mode,
    plan_install,
    read_bytes,
    run_command,
    sha256,
)
from native_host.install.record import (
    FLATPAK_OVERRIDE,
    MANIFEST,
    RECORD_FILE,
    ConfigEntry,
    FileEntry,
    InstallRecord,
    RecordError,
    RegistryEntry,
    load_record,
    missing_dirs,
    record_path,
    save_record,
)
from native_host.install.registry import Registry, WindowsRegistry
from native_host.usage import interrupts_held


def prepare_dir(directory: Path, scope: Scope) -> list[Path]:
    """Create `directory` (0700 for the user, 0755 for the system) and check it; returns
    the directories created, outermost first."""
    created = missing_dirs(directory)
    try:
        if scope is Scope.USER:
            files.ensure_private_dir(directory)
        else:
            for missing in created:
                missing.mkdir(mode=SYSTEM_DIR_MODE)
                os.chmod(missing, SYSTEM_DIR_MODE)  # mkdir's mode is masked by the umask
            files.check_directory(str(directory))
    except files.FileRefusedError as exc:
        raise InstallError(f"refusing to write into {directory}: {exc.explanation}") from None
    return created


# --- applying -------------------------------------------------------------------
_PAST = {
    "write": "wrote",
    "set": "set",
    "update": "updated",
    "remove": "removed",
    "restore": "restored",
    "grant": "granted",
}


class Printer:
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


def _desktop_manifest(content: bytes | None, ctx: Environment) -> bool:
    """Is this manifest Pedelec Desktop's own (its `path` is `~/.pedelec/pedelec-native-host`)?"""
    if content is None:
        return False
    try:
        data = json.loads(content)
    except ValueError:
        return False
    host = data.get("path") if isinstance(data, dict) else None
    return isinstance(host, str) and any(
        host == str(p) for p in locations.desktop_host_paths(ctx.platform, ctx.env, ctx.home)
    )


DESKTOP_REPLACED = (
    "{what} was Pedelec Desktop's registration: its content is kept in the install record "
    "and `pedelec-native-host uninstall` restores it. Pedelec Desktop rewrites it at its "
    "next foreground start; run this install again after that (`pedelec-native-host doctor` "
    "tells you when it happened)"
)


def _apply_file(
    write: FileWrite, record: InstallRecord, say: Printer, dry_run: bool, ctx: Environment
) -> None:
    current = read_bytes(write.path)
    entry = record.file(write.path)
    label = f"{write.role} {write.path}{_browsers(write.browsers)}"
    same_mode = current is not None and (
        not MODES_KEPT[ctx.os] or (write.path.stat().st_mode & 0o7777) == write.mode
    )
    if current == write.data and same_mode:
        say("unchanged", label)
    else:
        say("write", label)
        if not dry_run:
            created = prepare_dir(write.path.parent, write.scope)
            record.created_dirs.extend(str(d) for d in created if str(d) not in record.created_dirs)
            files.atomic_write(write.path, write.data, write.mode)
        if write.role == MANIFEST and current != write.data and _desktop_manifest(current, ctx):
            say("note", DESKTOP_REPLACED.format(what=write.path))
    if dry_run:
        return
    previous: str | None = None
    if entry is not None and current is not None and sha256(current) in (
        entry.sha256, sha256(write.data)
    ):  # fmt: skip
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
            mode=write.mode,
        )
    )


def _apply_key(
    write: KeyWrite,
    registry: Registry,
    record: InstallRecord,
    say: Printer,
    dry_run: bool,
    ctx: Environment,
) -> None:
    """Set the key in the 64-bit view, then in the 32-bit one when that still holds
    another value: Chromium reads the 32-bit view first, so it would shadow ours."""
    current = registry.get_default(write.key)
    _set_key(write, current, registry, record, say, dry_run, ctx)
    twin = write.key.in_view(RegistryView.WOW64_32)
    shadow = registry.get_default(twin)
    # HKCU\Software is one key in both views, so after the write its 32-bit view reads our
    # value; in a dry run nothing was written and a value equal to the 64-bit one is taken
    # for that same key.
    if shadow is None or shadow == write.value or (dry_run and shadow == current):
        return
    _set_key(
        KeyWrite(twin, write.value, write.browsers), shadow, registry, record, say, dry_run, ctx
    )


def _set_key(
    write: KeyWrite,
    current: str | None,
    registry: Registry,
    record: InstallRecord,
    say: Printer,
    dry_run: bool,
    ctx: Environment,
) -> None:
    entry = record.key(write.key)
    label = f"{write.key} = {write.value}{_browsers(write.browsers)}"
    if current == write.value:
        say("unchanged", label)
    else:
        say("set", label)
        if not dry_run:
            registry.set_default(write.key, write.value)
        if current is not None and current == str(
            locations.desktop_manifest_path(ctx.platform, ctx.home)
        ):
            say("note", DESKTOP_REPLACED.format(what=write.key))
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
            view=write.key.view,
        )
    )


def _apply_config(write: ConfigWrite, record: InstallRecord, say: Printer, dry_run: bool) -> None:
    existed = write.path.exists()
    say(
        "update" if existed else "write",
        f"config {write.path} (allowedExtensionIds + {', '.join(write.added_ids)})",
    )
    if dry_run:
        return
    created = prepare_dir(write.path.parent, Scope.USER)
    record.created_dirs.extend(str(d) for d in created if str(d) not in record.created_dirs)
    files.atomic_write(write.path, write.data, write.mode)
    previous = record.config
    created_file = (
        previous.created if previous and previous.path == str(write.path) else not existed
    )
    earlier = previous.added_ids if previous and previous.path == str(write.path) else []
    record.config = ConfigEntry(
        path=str(write.path),
        sha256=sha256(write.data),
        added_ids=list(dict.fromkeys([*earlier, *write.added_ids])),
        created=created_file,
    )


def _apply_grant(
    grant: Grant,
    options: InstallOptions,
    record: InstallRecord,
    say: Printer,
) -> bool:
    """Print or run the `flatpak override` a wrapper needs; False when running it failed."""
    command = flatpak.grant_command(grant.app_id)
    shown = shlex.join(command)
    before = read_bytes(grant.override)
    if before is not None and flatpak.grants_talk(before.decode("utf-8", "replace")):
        say("unchanged", f"flatpak override {grant.override} ({grant.browser}: already granted)")
        return True
    if not options.flatpak_grant:
        say(
            "flatpak",
            f"{grant.browser}: the wrapper works only after `{shown}`; "
            f"{flatpak.cost(grant.label, grant.app_id)}. Run it yourself, or install again "
            "with --flatpak-grant",
        )
        return True
    say("grant", f"{grant.browser}: `{shown}` ({flatpak.cost(grant.label, grant.app_id)})")
    if options.dry_run:
        return True
    code, output = run_command(command)
    after = read_bytes(grant.override)
    if code != 0 or after is None:
        say("failed", f"`{shown}` exited with status {code}: {output or 'no output'}")
        return False
    entry = record.file(grant.override)
    previous = entry.previous if entry else (before.decode("utf-8", "replace") if before else None)
    if entry is not None:
        record.files.remove(entry)
    record.files.append(
        FileEntry(
            path=str(grant.override),
            role=FLATPAK_OVERRIDE,
            sha256=sha256(after),
            browsers=[grant.browser],
            previous=previous,
            mode=grant.override.stat().st_mode & 0o7777,
        )
    )
    return True


def _trusted_record(path: Path) -> InstallRecord | None:
    try:
        return load_record(path)
    except RecordError as exc:
        raise InstallError(str(exc)) from None


def install(options: InstallOptions, ctx: Environment) -> Plan:
    """Plan, then write each file and key (unless dry run), keeping the record current even
    when a later write fails."""
    plan = plan_install(options, ctx)
    say = Printer(ctx.out, options.dry_run)
    for warning in plan.warnings:
        say("warning", warning)
    for line in plan.skipped:
        say("skipped", line)
    for line in plan.notes:
        say("note", line)
    rec_path = record_path(ctx.env)
    record = _trusted_record(rec_path) or InstallRecord()
    registry = ctx.registry_factory() if plan.keys else None
    granted = True
    # Each write and its entry in the record happen together (a Ctrl-C waits for both),
    # and the record is saved whatever stops the install: what is written is recorded,
    # so `uninstall` can take it away.
    try:
        if plan.image is not None and not options.dry_run:
            _keep_image_in_use(plan.image.path, say)
        for write in (plan.image, plan.launcher):
            if write is not None:
                with interrupts_held():
                    _apply_file(write, record, say, options.dry_run, ctx)
        if plan.config is not None:
            with interrupts_held():
                _apply_config(plan.config, record, say, options.dry_run)
        for write in [*plan.wrappers, *plan.manifests]:
            with interrupts_held():
                _apply_file(write, record, say, options.dry_run, ctx)
        for key in plan.keys:
            assert registry is not None
            with interrupts_held():
                _apply_key(key, registry, record, say, options.dry_run, ctx)
        for grant in plan.grants:
            with interrupts_held():
                granted = _apply_grant(grant, options, record, say) and granted
    finally:
        if not options.dry_run:
            try:
                with interrupts_held():
                    save_record(rec_path, record)
            except RecordError as exc:
                raise InstallError(str(exc)) from None
    if not granted:
        raise InstallError("a Flatpak permission could not be granted; see above")
    if not options.dry_run:
        _retire_old_versions(plan, ctx, say)
    return plan


def _keep_image_in_use(image: Path, say: Printer) -> None:
    """Hosts still running from the launcher's old image keep it, renamed, until they
    exit (`versions.retire_image`): `doctor` sees them, and they are unaffected."""
    kept = versions.retire_image(str(image))
    if kept is not None:
        version = versions.retired_version(kept)
        say("kept", f"{kept} (hosts of version {version} still run from it)")


def _retire_old_versions(plan: Plan, ctx: Environment, say: Printer) -> None:
    """After the registration names this version: a frozen bundle in a version folder
    (`<root>/<version>/`) becomes the root's current one, and every retired version
    (other folders there, or the launcher's kept images) that no host uses is removed;
    the others go when their last host exits (docs/install.md, "Upgrades")."""
    retired: list[str] = []
    if plan.image is not None:
        retired += versions.retired_images(str(plan.image.path))
    folder = os.path.dirname(os.path.abspath(ctx.executable))
    if ctx.frozen and os.path.basename(folder) == __version__:
        root = os.path.dirname(folder)
        versions.set_current(root, __version__)
        say("current", f"{folder} (in {os.path.join(root, versions.CURRENT)})")
        retired += versions.retired_folders(root)
    _remove_retired(retired, say)


def tidy(ctx: Environment) -> None:
    """`tidy`: the older versions beside this frozen bundle's own version folder that no
    host runs from any more, removed, and the others named; nothing registered. What the
    MSIs run once their files are in: a per-machine install's hosts, run by users, cannot
    remove a folder of Program Files as they exit."""
    say = Printer(ctx.out, dry_run=False)
    placed = versions.version_folder(ctx.executable) if ctx.frozen else None
    if placed is None:
        say("unchanged", f"{ctx.executable} (not a bundle in a folder of its version)")
        return
    root, own = placed
    retired = [p for p in versions.retired_folders(root) if os.path.basename(p) != own]
    if not retired:
        say("unchanged", f"{root} (no older version)")
    _remove_retired(retired, say)


def _remove_retired(retired: list[str], say: Printer) -> None:
    """Remove each retired version no host uses; say which went and which stay."""
    removed, used = versions.remove_unused(retired)
    for path in removed:
        say("removed", f"{path} (version {versions.retired_version(path)}, no longer used)")
    for path in used:
        version = versions.retired_version(path)
        say("kept", f"{path} (hosts of version {version} run from it; it goes when they exit)")


def default_environment(out: TextIO | None, system_root: Path = Path("/")) -> Environment:
    """The real machine: this platform, environment, home and interpreter (its system
    folders under `system_root`, where tests put a machine of their own)."""
    import sys

    return Environment(
        platform=sys.platform,
        env=os.environ,
        home=locations.home_from_env(os.environ, sys.platform),
        executable=sys.executable,
        frozen=bool(getattr(sys, "frozen", False)),
        out=out,
        system_root=system_root,
    )


__all__ = [
    "LAUNCHER_NAMES",
    "RECORD_FILE",
    "WINDOWS_LAUNCHER",
    "Environment",
    "InstallError",
    "InstallOptions",
    "Plan",
    "Printer",
    "Registry",
    "UsageError",
    "WindowsRegistry",
    "as_local",
    "file_mode",
    "install",
    "launcher_interpreter",
    "launcher_text",
    "plan_install",
    "read_bytes",
    "render_manifest",
    "sha256",
    "tidy",
]
