"""Which manifest a browser would load, which host it names, and whether Chrome would
accept it (a table of checks, each with the browser's own error message).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.install import host_location, locations
from native_host.install.doctor.report import (
    EXITED,
    FORBIDDEN,
    NOT_FOUND,
    Finding,
    Status,
)
from native_host.install.locations import REGISTRY_VIEWS, Os, RegistryKey, Scope, Target
from native_host.install.plan import as_local, sha256
from native_host.install.record import InstallRecord
from native_host.install.registry import Registry

MAX_MANIFEST_BYTES = 1_048_576


@dataclass
class ManifestContext:
    """A parsed manifest and what its checks need."""

    path: Path
    data: dict[str, Any]
    os: Os
    config_ids: tuple[str, ...]
    install_hint: str

    @property
    def host_path(self) -> Path | None:
        value = self.data.get("path")
        if not isinstance(value, str) or not value:
            return None
        if self.os is Os.WIN32 and not PureWindowsPath(value).is_absolute():
            return self.path.parent / value  # only Windows resolves against the manifest dir
        return Path(value)

    @property
    def origins(self) -> list[Any]:
        value = self.data.get("allowed_origins")
        return value if isinstance(value, list) else []


CheckResult = tuple[bool, str]


def _check_name(ctx: ManifestContext) -> CheckResult:
    name = ctx.data.get("name")
    return name == HOST_NAME, f"{name!r}" + ("" if name == HOST_NAME else f", not {HOST_NAME!r}")


def _check_type(ctx: ManifestContext) -> CheckResult:
    kind = ctx.data.get("type")
    return kind == "stdio", f"{kind!r}" + ("" if kind == "stdio" else ", not 'stdio'")


def _check_absolute(ctx: ManifestContext) -> CheckResult:
    host = ctx.host_path
    if host is None:
        return False, "missing or not a string"
    # A `C:\\...` path is absolute on Windows (judged by Windows rules wherever this runs).
    absolute = host.is_absolute() or (ctx.os is Os.WIN32 and PureWindowsPath(host).is_absolute())
    return absolute, str(host) + ("" if absolute else " is relative")


def _check_exists(ctx: ManifestContext) -> CheckResult:
    host = ctx.host_path
    assert host is not None
    return host.is_file(), str(host) + ("" if host.is_file() else " does not exist")


def _check_executable(ctx: ManifestContext) -> CheckResult:
    host = ctx.host_path
    assert host is not None
    runnable = ctx.os is Os.WIN32 or os.access(host, os.X_OK)
    return runnable, str(host) + ("" if runnable else " is not executable")


def _check_only_yours(ctx: ManifestContext) -> CheckResult:
    """The rule `install` refuses a host by (host_location.py): nobody else can change
    the file `path` names, the folders on the way to it or a script's interpreter."""
    host = ctx.host_path
    assert host is not None
    if ctx.os is not locations.normalize_platform(sys.platform):
        return True, f"{host} (not judged: another system's path)"
    problem = host_location.refusal(str(host), os.environ)
    if problem is None:
        return True, f"{host} and every folder on the way to it are yours alone"
    return False, f"{problem}: another user could swap what the browser runs"


def _check_origins_shape(ctx: ManifestContext) -> CheckResult:
    if not isinstance(ctx.data.get("allowed_origins"), list):
        return False, "allowed_origins is missing or not a list"
    bad = [o for o in ctx.origins if not _origin_id(o)]
    return not bad, (f"not chrome-extension://<id>/: {bad}" if bad else f"{len(ctx.origins)} ok")


def _check_official(ctx: ManifestContext) -> CheckResult:
    allowed = locations.extension_origin(OFFICIAL_EXTENSION_ID) in ctx.origins
    return allowed, OFFICIAL_EXTENSION_ID + ("" if allowed else " is not in allowed_origins")


def _check_extra_ids(ctx: ManifestContext) -> CheckResult:
    listed = [i for i in map(_origin_id, ctx.origins) if i and i != OFFICIAL_EXTENSION_ID]
    missing = [i for i in ctx.config_ids if i not in listed]
    unconfigured = [i for i in listed if i not in ctx.config_ids]
    problems = []
    if missing:
        problems.append(f"config allows {', '.join(missing)} but allowed_origins does not")
    if unconfigured:
        problems.append(f"allowed_origins lists {', '.join(unconfigured)} but config.json does not")
    return not problems, "; ".join(problems) or (", ".join(listed) or "none")


def _origin_id(origin: object) -> str | None:
    if not isinstance(origin, str) or not origin.startswith("chrome-extension://"):
        return None
    ext_id = origin.removeprefix("chrome-extension://").removesuffix("/")
    ok = origin.endswith("/") and locations.EXTENSION_ID_RE.match(ext_id)
    return ext_id if ok else None


@dataclass(frozen=True)
class ManifestCheck:
    """A row of the manifest table: skipped when a check it `needs` did not pass."""

    name: str
    test: Callable[[ManifestContext], CheckResult]
    failure: Status
    symptom: str
    hint: str
    needs: tuple[str, ...] = ()
    cause: str = "registration-broken"
    """Its failure in a user's words (`verdict.CAUSES`)."""


MANIFEST_CHECKS: tuple[ManifestCheck, ...] = (
    ManifestCheck("name", _check_name, Status.FAIL, NOT_FOUND, "run `{install}`"),
    ManifestCheck("type", _check_type, Status.FAIL, NOT_FOUND, "run `{install}`"),
    ManifestCheck("path absolute", _check_absolute, Status.FAIL, NOT_FOUND, "run `{install}`"),
    ManifestCheck(
        "path exists",
        _check_exists,
        Status.FAIL,
        NOT_FOUND,
        "run `{install}`",
        ("path absolute",),
        "host-gone",
    ),
    ManifestCheck(
        "path executable",
        _check_executable,
        Status.FAIL,
        EXITED,
        "chmod 755 the file named by `path`, or run `{install}`",
        ("path exists",),
        "host-broken",
    ),
    ManifestCheck(
        "path only yours",
        _check_only_yours,
        Status.FAIL,
        "another local user can make the browser run their program as you",
        "{only_yours}",
        ("path executable",),
        "host-shared",
    ),
    ManifestCheck(
        "allowed_origins valid", _check_origins_shape, Status.FAIL, NOT_FOUND, "run `{install}`"
    ),
    ManifestCheck(
        "official extension allowed",
        _check_official,
        Status.FAIL,
        FORBIDDEN,
        "run `{install}`",
        cause="extension-refused",
    ),
    ManifestCheck(
        "extra extension ids",
        _check_extra_ids,
        Status.WARN,
        f"{FORBIDDEN} (or {EXITED} after ORIGIN_NOT_APPROVED)",
        "run `{install} --extension-id ID` for each id you use",
        cause="",
    ),
)


def run_manifest_table(subject: str, ctx: ManifestContext) -> tuple[list[Finding], set[str]]:
    """Every check whose prerequisites passed; returns the findings and what passed."""
    findings: list[Finding] = []
    passed: set[str] = set()
    for check in MANIFEST_CHECKS:
        if not set(check.needs) <= passed:
            continue
        ok, detail = check.test(ctx)
        if ok:
            passed.add(check.name)
            findings.append(Finding(Status.OK, subject, check.name, detail))
        else:
            hint = check.hint.format(install=ctx.install_hint, only_yours=host_location.fix(detail))
            findings.append(
                Finding(
                    check.failure, subject, check.name, detail, hint, check.symptom, check.cause
                )
            )
    return findings, passed


# --- which manifest the browser loads -----------------------------------------------------
@dataclass(frozen=True)
class Registered:
    """The manifest a browser would load, where it was found, and what it shadows."""

    path: Path
    where: str
    target: Target
    shadowed: tuple[str, ...] = ()


@dataclass
class Lookup:
    """Finds manifests as a browser does: registry keys on Windows, files elsewhere;
    system paths under `root` (tests simulate `/etc` and `/Library` there)."""

    os: Os
    registry: Registry | None
    root: Path = Path("/")
    ignored: list[str] = field(default_factory=list)

    def local(self, target: Target) -> Path:
        path = as_local(target.manifest_path)
        if target.scope is Scope.SYSTEM and self.os is not Os.WIN32:
            return self.root / PurePosixPath(path.as_posix()).relative_to("/")
        return path

    def find(self, order: Sequence[Target], user_level: bool = True) -> Registered | None:
        found: list[tuple[Path, str, Target]] = []
        seen_keys: set[tuple[str, str, str]] = set()
        for target in order:
            if target.scope is Scope.USER and not user_level:
                continue
            key = target.registry_key
            if key is not None and self.registry is not None:
                value = self.registry.get_default(key)
                # A key shared by both views (HKCU\Software) reads the same in each: one entry.
                if value and (key.hive, key.path, value) not in seen_keys:
                    seen_keys.add((key.hive, key.path, value))
                    local = as_local(PureWindowsPath(value))  # a Windows path, wherever we run
                    found.append((local, f"{key} -> {value}", target))
                continue
            manifest = self.local(target)
            if manifest.exists():
                found.append((manifest, str(manifest), target))
        if not found:
            return None
        (path, where, target), rest = found[0], found[1:]
        return Registered(path, where, target, tuple(w for _, w, _ in rest))


def read_manifest(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The manifest as JSON and "", or None and why Chrome would not read it."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        return None, "file missing"
    except OSError as exc:
        return None, exc.strerror or str(exc)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return None, str(exc)
    if not isinstance(data, dict):
        return None, "not a JSON object"
    return data, ""


# --- which host it names ----------------------------------------------------------------
DESKTOP_REREGISTERED = (
    "Pedelec Desktop registered its own host again (it does at every foreground start), "
    "replacing the one `pedelec-native-host install` wrote"
)


def same_path(a: PurePath | str, b: PurePath | str) -> bool:
    """The same file by name, as the file system of this OS compares names."""
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


MSI_FOLDERS = (
    ("per-user MSI", RegistryKey("HKCU", r"Software\pedelec-native-host\Installer")),
    ("per-machine MSI", RegistryKey("HKLM", r"Software\pedelec-native-host\Installer")),
)
"""Where each Windows package remembers its install folder (packaging/windows/
msi_document.py, `SCOPES`: its hive, `COMPONENTS_KEY`, `REMEMBERED_FOLDER`)."""
MSI_FOLDER_VALUE = "InstallDir"


def _inside(host: PurePath, folder: PurePath) -> bool:
    """`host` is in `folder` or below it, as this OS compares names."""
    host_name, folder_name = (os.path.normcase(os.path.abspath(p)) for p in (host, folder))
    return host_name.startswith(folder_name.rstrip(os.sep) + os.sep)


def host_identity(
    subject: str,
    registered: Registered,
    host: PurePath | None,
    record: InstallRecord | None,
    desktop_hosts: Sequence[PurePath],
    install_hint: str,
    bundle: PurePath | None = None,
    packaged: Sequence[tuple[str, PurePath]] = (),
) -> Finding:
    """Which host this browser will start: this one (what `install` wrote, or the
    bundle running doctor: the MSI's registration), one of this package's MSIs'
    (`packaged`: label and install folder), Pedelec Desktop's, or another."""
    check = "host registered"
    if host is not None and bundle is not None and same_path(host, bundle):
        return Finding(Status.OK, subject, check, f"this host ({host}, which runs this doctor)")
    for label, folder in packaged:
        if host is not None and _inside(host, folder):
            return Finding(Status.OK, subject, check, f"the {label}'s host ({host})")
    try:
        content = registered.path.read_bytes()[:MAX_MANIFEST_BYTES]
    except OSError:
        content = b""
    entry = record.file(registered.path) if record else None
    key = registered.target.registry_key
    ours_here = entry is not None or bool(
        record and key and any(record.key(key.in_view(v)) for v in REGISTRY_VIEWS)
    )
    if host is not None and any(str(host) == str(d) for d in desktop_hosts):
        if ours_here:
            return Finding(
                Status.WARN,
                subject,
                check,
                f"Pedelec Desktop's host ({host}): {DESKTOP_REREGISTERED}",
                f'run `{install_hint}` to switch back to this host (docs/install.md, "Switching '
                'hosts")',
                "the page talks to Pedelec Desktop's bundled host, not this one",
                "desktop-host-back",
            )
        return Finding(
            Status.OK,
            subject,
            check,
            f"Pedelec Desktop's host ({host}); `{install_hint}` switches to this one",
        )
    recorded = {e.path for e in (record.files if record else [])}
    if (entry is not None and entry.sha256 == sha256(content)) or str(host) in recorded:
        return Finding(Status.OK, subject, check, f"this host ({host})")
    return Finding(
        Status.WARN,
        subject,
        check,
        f"another host: {host} (not written by `pedelec-native-host install`)",
        f"run `{install_hint}` to register this host instead",
    )


def config_ids(env: Mapping[str, str]) -> tuple[str, ...]:
    """Extra extension ids the host allows (from `config.json`, via the host's reader)."""
    from native_host.config import load_config

    return load_config(env).allowed_extension_ids
