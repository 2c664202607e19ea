"""Planning an install: which browsers, and every file and key to write, decided
without touching anything (so `--dry-run` shows exactly what install would do).

Per browser the plan says what it will do and why not, when it will not: a Snap cannot
be registered, a Flatpak only with `--flatpak`, and the launcher refuses an interpreter
that will not last (`interpreter.classify`) unless `--force` is given.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, TextIO

from native_host import files, paths, startimage
from native_host.install import flatpak, host_location, interpreter, locations, programs, shortname
from native_host.install.contents import (
    interpreter_options,
    launcher_name,
    launcher_text,
    render_manifest,
)
from native_host.install.locations import BrowserRow, Os, RegistryKey, Sandbox, Scope, Target
from native_host.install.record import FLATPAK_WRAPPER, LAUNCHER, MANIFEST, START_IMAGE
from native_host.install.registry import Registry, WindowsRegistry

# User scope: the user's own browser reads everything, nobody else needs to.
USER_FILE_MODE = files.PRIVATE_FILE_MODE
USER_EXEC_MODE = 0o700
# System scope: browsers run by every user of the machine read the manifest and run the
# launcher, so they stay world-readable (and root-owned, not writable by others).
SYSTEM_FILE_MODE = 0o644
SYSTEM_EXEC_MODE = 0o755
SYSTEM_DIR_MODE = 0o755


class InstallError(Exception):
    """A problem the user must fix before anything can be written (exit 1)."""


class UsageError(InstallError):
    """A bad option or option value (exit 2, as argparse does)."""


# --- file helpers -----------------------------------------------------------------
def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def as_local(path: PurePath) -> Path:
    """A target-flavoured path as a real one (identity on the platform it was made for)."""
    return Path(path.as_posix()) if not isinstance(path, Path) else path


MODES_KEPT = {Os.LINUX: True, Os.DARWIN: True, Os.WIN32: False}
"""Does the file system keep the mode bits install sets? Windows keeps only a read-only
flag (`os.chmod` "can only set the file's read-only flag"; `st_mode` reads 0o666 or 0o444),
so there a file is unchanged when its bytes are."""


def file_mode(scope: Scope, executable: bool) -> int:
    if scope is Scope.USER:
        return USER_EXEC_MODE if executable else USER_FILE_MODE
    return SYSTEM_EXEC_MODE if executable else SYSTEM_FILE_MODE


def check_target_dir(directory: Path) -> None:
    """Refuse a directory (or, if missing, its nearest existing ancestor) that another
    user owns or can write: they could swap what we write there."""
    probe = directory
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        files.check_directory(str(probe))
    except files.FileRefusedError as exc:
        raise InstallError(f"refusing to write into {directory}: {exc.explanation}") from None


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
    flatpak: bool = False
    """Also register Flatpak browsers (writes the in-sandbox wrapper)."""
    flatpak_grant: bool = False
    """Also run `flatpak override ... --talk-name=org.freedesktop.Flatpak` for them."""
    force: bool = False
    """Bake in an interpreter that lives in a cache or temporary location anyway."""
    verbose: bool = False
    """Say everything looked for when nothing is found."""


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """Run a helper program (`flatpak override`); exit status and its output."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, (done.stderr or done.stdout).strip()


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
    describe_interpreter: Callable[[str, Mapping[str, str]], interpreter.Interpreter] = (
        interpreter.current
    )
    build_image: Callable[[str, Sequence[str], Sequence[str]], bytes] = startimage.build
    """The launcher's start image for an interpreter, its options and import paths."""
    system_root: Path = Path("/")
    """Prefix of the browsers' system paths (`/opt`, `/Applications`): tests put a whole
    machine there."""

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
    scope: Scope = Scope.USER


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


@dataclass(frozen=True)
class Grant:
    """A Flatpak app that needs `--talk-name=org.freedesktop.Flatpak` for its wrapper."""

    browser: str
    label: str
    app_id: str
    override: Path


@dataclass
class Plan:
    """Everything one install will write, in the order it is written."""

    launcher: FileWrite | None
    image: FileWrite | None
    """The launcher's start image (`native_host.startimage`), written with it."""
    config: ConfigWrite | None
    manifests: list[FileWrite]
    keys: list[KeyWrite]
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """One line per browser found but not registered, saying why and what to do."""
    notes: list[str] = field(default_factory=list)
    """One line per browser registered though never started, and what to do next."""
    wrappers: list[FileWrite] = field(default_factory=list)
    grants: list[Grant] = field(default_factory=list)


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


SNAP_UNSUPPORTED = (
    "{label}: not registered: a Snap browser cannot start a native messaging host outside "
    "its confinement; use the browser's .deb or vendor package, or its Flatpak "
    "(`pedelec-native-host install --flatpak`)"
)
FLATPAK_OPT_IN = (
    "{label}: not registered: a Flatpak browser needs an in-sandbox wrapper and "
    "`flatpak override --user --talk-name=org.freedesktop.Flatpak {app_id}`, which lets it "
    "start any program outside its sandbox; pass --flatpak to register it"
)
FLATPAK_SYSTEM = "{label}: not registered: a Flatpak browser reads no system-level manifest"


def _started(row: BrowserRow, ctx: Environment) -> bool:
    """Its user data dir exists: the browser has run for this user."""
    return as_local(locations.row_user_data_dir(row, ctx.env, ctx.home)).is_dir()


NEVER_STARTED = (
    "{label}: installed ({program}) but never started: registered all the same; start it "
    "once, then add the Pedelec extension"
)


@dataclass
class Presence:
    """Which browsers are installed: started (user data dir) or only their program found."""

    rows: list[BrowserRow] = field(default_factory=list)
    never_started: dict[str, Path] = field(default_factory=dict)
    """Row name -> its program, for a browser whose user data dir does not exist yet."""
    refused: list[str] = field(default_factory=list)
    """A program present that another user could have planted, and why it does not count."""


def installed_rows(rows: Iterable[BrowserRow], ctx: Environment) -> Presence:
    """The rows whose browser is installed for this user (`programs.find_program`)."""
    presence = Presence()
    for row in rows:
        if _started(row, ctx):
            presence.rows.append(row)
            continue
        found = programs.find_program(row, ctx.env, ctx.home, ctx.system_root)
        presence.refused += [f"{row.name}: {why}: not counted as installed"
                             for why in found.refused]  # fmt: skip
        if found.program is not None:
            presence.rows.append(row)
            presence.never_started[row.name] = found.program
    return presence


def _sandbox_refusal(row: BrowserRow, options: InstallOptions) -> str | None:
    """Why a sandboxed row is not registered (None: it is)."""
    facts = {"label": row.label, "app_id": row.sandbox_id}
    if row.sandbox is Sandbox.SNAP:
        return SNAP_UNSUPPORTED.format(**facts)
    if row.sandbox is Sandbox.FLATPAK and not options.flatpak:
        return FLATPAK_OPT_IN.format(**facts)
    if row.sandbox is Sandbox.FLATPAK and options.scope is Scope.SYSTEM:
        return FLATPAK_SYSTEM.format(**facts)
    return None


NO_BROWSER = "no installed browser found: pass --browser NAME, --browser all or --user-data-dir DIR"


def _no_browser_found(ctx: Environment, verbose: bool, refused: Sequence[str]) -> str:
    """What to pass, in one line; with `verbose`, every directory and program looked for,
    one a line, and each program refused (`doctor --browser all` checks each browser too)."""
    rows = locations.rows_for(ctx.platform)
    if not verbose:
        return f"{NO_BROWSER} (--verbose lists the {len(rows)} browsers' folders and programs)"
    looked = []
    for row in rows:
        places = [locations.row_user_data_dir(row, ctx.env, ctx.home)]
        places += [programs.local_path(p, ctx.system_root)
                   for p in locations.row_programs(row, ctx.env, ctx.home)]  # fmt: skip
        looked.append(f"{row.name}: {', '.join(map(str, places))}")
    lines = [*looked, *(f"refused {line}" for line in refused)]
    return f"{NO_BROWSER}; none of these exists:\n  " + "\n  ".join(lines)


@dataclass
class Selection:
    """Where to register, and the lines that say what was left out or needs doing."""

    targets: list[Target]
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def select_targets(options: InstallOptions, ctx: Environment) -> Selection:
    """Explicit browsers and profile roots, else every browser that is installed; plus one
    line per browser left out and why, registered before its first start, or whose
    program was refused."""
    if options.user_data_dirs and ctx.os is Os.WIN32:
        raise UsageError("--user-data-dir has no effect on Windows: Chrome reads the registry")
    chosen: list[Target] = [locations.custom_target(d.absolute()) for d in options.user_data_dirs]
    names: Iterable[str] | None = options.browsers
    try:
        rows = locations.select_rows(ctx.platform, names)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    presence = Presence()
    if names is None:
        presence = installed_rows(rows, ctx)
        rows = tuple(presence.rows)
        if options.user_data_dirs:  # profile roots given: only --flatpak adds browsers
            rows = tuple(row for row in rows if options.flatpak and row.sandbox is Sandbox.FLATPAK)
            if not rows:
                return Selection(chosen)
        if not rows:
            raise InstallError(_no_browser_found(ctx, options.verbose, presence.refused))
    selection = Selection(chosen, warnings=list(presence.refused))
    for row in rows:
        refusal = _sandbox_refusal(row, options)
        if refusal is not None:
            selection.skipped.append(refusal)
            continue
        chosen += locations.targets(ctx.platform, ctx.env, ctx.home, options.scope, [row.name])
        if row.name in presence.never_started:
            program = presence.never_started[row.name]
            selection.notes.append(NEVER_STARTED.format(label=row.label, program=program))
    if not chosen:
        raise InstallError("no browser registered:\n  " + "\n  ".join(selection.skipped))
    return selection


def _given_host(host_path: Path, ctx: Environment) -> Path:
    """`--host-path`, absolute: an existing executable file (UsageError otherwise)."""
    host = host_path.absolute()
    if not host.is_file():
        raise UsageError(f"--host-path {host} is not an existing file")
    if ctx.os is not Os.WIN32 and not os.access(host, os.X_OK):
        raise UsageError(f"--host-path {host} is not executable (chmod 755 it)")
    return host


def _host_path(
    options: InstallOptions, ctx: Environment, warnings: list[str]
) -> tuple[str, FileWrite | None, FileWrite | None]:
    """What the manifest's `path` points at, and the launcher and its start image to
    write for it, if any.

    The image holds this package's code, compiled by this interpreter: the one the
    launcher runs (`interpreter.current`)."""
    if options.host_path is not None:
        host = _given_host(options.host_path, ctx)
        refuse_shared_location("the host", str(host), ctx, options.scope)
        return str(host), None, None
    if ctx.frozen:
        refuse_shared_location("this executable", ctx.executable, ctx, options.scope)
        return ctx.executable, None, None
    refuse_shared_location("the interpreter", ctx.executable, ctx, options.scope)
    seen = ctx.describe_interpreter(ctx.executable, ctx.env)
    risk = interpreter.classify(seen)
    if risk is not None:
        if not options.force:
            raise InstallError(f"the launcher would not last: {risk.message()}")
        warnings.append(f"--force: baking in {risk.where}, which {risk.why}")
    import_paths = interpreter.import_paths(seen) if risk is None else ()
    same_system = ctx.os is locations.normalize_platform(sys.platform)
    for folder in import_paths if same_system else ():
        problem = host_location.folder_refusal(folder)
        if problem is not None:
            raise InstallError(
                f"refusing to register a launcher importing from {folder}: {problem}. "
                f"Fix: {host_location.fix(problem)}"
            )
    if options.scope is Scope.USER:
        directory = Path(paths.install_record_dir(ctx.env))
    else:
        directory = as_local(locations.launcher_dir(ctx.platform, ctx.env, ctx.home, Scope.SYSTEM))
    launcher = directory / launcher_name(ctx.os)
    image: FileWrite | None = None
    try:
        python_options = interpreter_options(import_paths)
        compiled = ctx.build_image(ctx.executable, python_options, import_paths)
    except OSError as exc:
        warnings.append(f"no start image, so every start imports the usual way: {exc}")
    else:
        image_path = directory / startimage.IMAGE_NAME
        mode = file_mode(options.scope, executable=False)
        image = FileWrite(image_path, compiled, mode, START_IMAGE, (), options.scope)
    try:
        text = launcher_text(
            ctx.os,
            ctx.executable,
            import_paths,
            str(directory),
            shortname.short_path,
            image=None if image is None else str(image.path),
        )
    except ValueError as exc:
        raise InstallError(f"cannot write the launcher: {exc}") from None
    write = FileWrite(
        launcher, text, file_mode(options.scope, executable=True), LAUNCHER, (), options.scope
    )
    return str(launcher), write, image


FOR_EVERY_USER = (
    "refusing to register {what} ({path}) for every user of this machine: {problem}, so "
    "another user could make every user's browser run their program. Fix: put it where "
    "only root (an administrator) can change it, as the system packages do: the tarball "
    'extracted into /opt by root (docs/install.md, "For administrators")'
)
"""The system scope's refusal: every user's browser runs the host, and run by root the
rule accepts root's files and folders only (issue 31)."""


def refuse_shared_location(
    what: str, path: str, ctx: Environment, scope: Scope = Scope.USER
) -> None:
    """InstallError when another user could change `path` (what the manifest would run),
    saying which file or folder and the fix (host_location.py: doctor's rule too). A
    plan for another system (the tests') names paths this one cannot judge."""
    if ctx.os is not locations.normalize_platform(sys.platform):
        return
    problem = host_location.refusal(path, ctx.env)
    if problem is None:
        return
    if scope is Scope.SYSTEM:
        raise InstallError(FOR_EVERY_USER.format(what=what, path=path, problem=problem))
    raise InstallError(
        f"refusing to register {what} ({path}): {problem}, so another user could make "
        f"the browser run their program as you. Fix: {host_location.fix(problem)}"
    )


def _config_write(options: InstallOptions, ctx: Environment, warnings: list[str]) -> tuple[
    list[str], ConfigWrite | None
]:  # fmt: skip
    """Ids to allow in every manifest, and the `config.json` update that adds new ones."""
    new_ids = []
    for value in options.extension_ids:
        try:
            new_ids.append(locations.normalize_extension_id(value))
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    config_path = Path(paths.config_dir(ctx.env)) / paths.CONFIG_FILE
    config = _read_config(config_path)
    existing_ids = _config_ids(config, warnings)
    added = [i for i in dict.fromkeys(new_ids) if i not in existing_ids]
    if not added:
        return existing_ids, None
    merged = dict(config)
    before = config.get("allowedExtensionIds", [])
    merged["allowedExtensionIds"] = [*(before if isinstance(before, list) else []), *added]
    data = (json.dumps(merged, indent=2, ensure_ascii=False) + "\n").encode()
    # The host reads config.json only when nobody else can write it (files.read_trusted).
    write = ConfigWrite(config_path, data, tuple(added), files.PRIVATE_FILE_MODE)
    return [*existing_ids, *added], write


def plan_install(options: InstallOptions, ctx: Environment) -> Plan:
    """Decide every write without performing any."""
    warnings: list[str] = []
    if options.host_path is not None:
        _given_host(options.host_path, ctx)  # a usage error before anything else
    ids, config_write = _config_write(options, ctx, warnings)
    selection = select_targets(options, ctx)
    chosen, skipped = selection.targets, selection.skipped
    warnings += selection.warnings
    host, launcher, image = _host_path(options, ctx, warnings)
    manifest_mode = file_mode(options.scope, executable=False)

    by_path: dict[Path, tuple[bytes, list[str]]] = {}
    keys: dict[RegistryKey, list[str]] = {}
    wrappers: dict[Path, FileWrite] = {}
    grants: dict[str, Grant] = {}
    for target in chosen:
        points_at = host
        if target.sandbox is Sandbox.FLATPAK:
            wrapper = as_local(locations.flatpak_wrapper_path(ctx.home, target.sandbox_id))
            points_at = str(wrapper)
            wrappers[wrapper] = FileWrite(
                wrapper,
                flatpak.wrapper_text(host),
                USER_EXEC_MODE,
                FLATPAK_WRAPPER,
                (target.browser,),
            )
            override = as_local(
                locations.flatpak_override_paths(ctx.env, ctx.home, target.sandbox_id)[0]
            )
            grants[target.sandbox_id] = Grant(
                target.browser, target.label, target.sandbox_id, override
            )
        path = as_local(target.manifest_path)
        _, browsers = by_path.setdefault(path, (render_manifest(points_at, ids), []))
        browsers.append(target.browser)
        if target.registry_key is not None:
            keys.setdefault(target.registry_key, []).append(target.browser)
    manifests = [
        FileWrite(p, data, manifest_mode, MANIFEST, tuple(dict.fromkeys(b)), options.scope)
        for p, (data, b) in by_path.items()
    ]
    manifest_file = str(locations.windows_manifest_path(ctx.env, ctx.home, options.scope))
    key_writes = [KeyWrite(k, manifest_file, tuple(dict.fromkeys(b))) for k, b in keys.items()]
    directories = [w.path.parent for w in [*manifests, *wrappers.values()]]
    directories += [launcher.path.parent] if launcher else []
    directories += [config_write.path.parent] if config_write else []
    for directory in [*directories, Path(paths.install_record_dir(ctx.env))]:
        check_target_dir(directory)
    return Plan(
        launcher,
        image,
        config_write,
        manifests,
        key_writes,
        warnings,
        skipped,
        selection.notes,
        list(wrappers.values()),
        list(grants.values()),
    )
