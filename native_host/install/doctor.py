"""`pedelec-native-host doctor`: say what stops the host from working, in the words the
browser would use, with a fix for each problem.

Three parts: each browser's registered manifest (a table of checks), a self-test that
starts the registered host exactly as Chrome does and exchanges one `ping`, and the Core
side (`runtime.json`, a Core ping, `app-launch.json`, policy, config, logs). The Core-side
files are read with the host's own parsers so the doctor sees what the host sees.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePath
from typing import Any, TextIO

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID, paths
from native_host.install import locations
from native_host.install.cli import add_user_data_dir_option
from native_host.install.installer import Registry, WindowsRegistry, as_local
from native_host.install.locations import Os, Target

NOT_FOUND = '"Specified native messaging host not found."'
FORBIDDEN = '"Access to the specified native messaging host is forbidden."'
EXITED = '"Native host has exited."'
COMMUNICATION = '"Error when communicating with the native messaging host."'
CORE_DOWN = "CORE_RUNTIME_UNAVAILABLE (pedelec-app is not running)"

PING_ID = "doctor_ping"
DEFAULT_TIMEOUT_S = 15.0
EXIT_GRACE_S = 3.0
CORE_TIMEOUT_S = 3.0
MAX_CORE_LINE = 1_048_576


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One line of the report."""

    status: Status
    subject: str
    check: str
    detail: str
    hint: str = ""
    symptom: str = ""
    """What the user would see: Chrome's `lastError` message in quotes, or the error
    code requests would fail with."""

    def line(self) -> str:
        text = f"{self.status.value:<4}  {self.subject:<16} {self.check}: {self.detail}"
        if self.status is not Status.OK:
            if self.symptom:
                text += f" | symptom: {self.symptom}"
            if self.hint:
                text += f" | fix: {self.hint}"
        return text


# --- manifest checks ------------------------------------------------------------------
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
        host = Path(value)
        if self.os is Os.WIN32 and not host.is_absolute():
            return self.path.parent / host  # only Windows resolves against the manifest dir
        return host

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
    return host.is_absolute(), str(host) + ("" if host.is_absolute() else " is relative")


def _check_exists(ctx: ManifestContext) -> CheckResult:
    host = ctx.host_path
    assert host is not None
    return host.is_file(), str(host) + ("" if host.is_file() else " does not exist")


def _check_executable(ctx: ManifestContext) -> CheckResult:
    host = ctx.host_path
    assert host is not None
    runnable = ctx.os is Os.WIN32 or os.access(host, os.X_OK)
    return runnable, str(host) + ("" if runnable else " is not executable")


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


MANIFEST_CHECKS: tuple[ManifestCheck, ...] = (
    ManifestCheck("name", _check_name, Status.FAIL, NOT_FOUND, "run `{install}`"),
    ManifestCheck("type", _check_type, Status.FAIL, NOT_FOUND, "run `{install}`"),
    ManifestCheck("path absolute", _check_absolute, Status.FAIL, NOT_FOUND, "run `{install}`"),
    ManifestCheck(
        "path exists", _check_exists, Status.FAIL, NOT_FOUND, "run `{install}`", ("path absolute",)
    ),
    ManifestCheck(
        "path executable",
        _check_executable,
        Status.FAIL,
        EXITED,
        "chmod 755 the file named by `path`, or run `{install}`",
        ("path exists",),
    ),
    ManifestCheck(
        "allowed_origins valid", _check_origins_shape, Status.FAIL, NOT_FOUND, "run `{install}`"
    ),
    ManifestCheck(
        "official extension allowed", _check_official, Status.FAIL, FORBIDDEN, "run `{install}`"
    ),
    ManifestCheck(
        "extra extension ids",
        _check_extra_ids,
        Status.WARN,
        f"{FORBIDDEN} (or {EXITED} after ORIGIN_NOT_APPROVED)",
        "run `{install} --extension-id ID` for each id you use",
    ),
)


# --- finding the registered manifest ---------------------------------------------------
@dataclass
class Doctor:
    """Runs every check for one environment; `findings` is the report."""

    platform: str
    env: Mapping[str, str]
    home: PurePath
    timeout: float = DEFAULT_TIMEOUT_S
    registry_factory: Callable[[], Registry] = WindowsRegistry
    findings: list[Finding] = field(default_factory=list)
    _self_tests: dict[str, list[Finding]] = field(default_factory=dict)

    @property
    def os(self) -> Os:
        return locations.normalize_platform(self.platform)

    def add(self, *findings: Finding) -> None:
        self.findings.extend(findings)

    # -- browsers --------------------------------------------------------------------
    def installed_browsers(self) -> list[str]:
        """Browsers whose user data dir exists or that have a manifest registered."""

        def present(row: locations.BrowserRow) -> bool:
            user_data = as_local(locations.row_user_data_dir(row, self.env, self.home))
            return user_data.is_dir() or self._registered(self.lookup(row.name))[0] is not None

        return [row.name for row in locations.rows_for(self.platform) if present(row)]

    def lookup(self, name: str) -> list[Target]:
        return locations.lookup_order(self.platform, self.env, self.home, name)

    def _registered(self, order: Sequence[Target]) -> tuple[Path | None, str, list[str]]:
        """The manifest the browser would load, where it came from, and what it shadows."""
        found: list[tuple[Path, str]] = []
        registry = self.registry_factory() if self.os is Os.WIN32 else None
        for target in order:
            if target.registry_key is not None and registry is not None:
                value = registry.get_default(target.registry_key)
                if value:
                    found.append((Path(value), f"{target.registry_key} -> {value}"))
            else:
                manifest = as_local(target.manifest_path)
                if manifest.exists():
                    found.append((manifest, str(manifest)))
        if not found:
            return None, "", []
        return found[0][0], found[0][1], [where for _, where in found[1:]]

    def check_browser(self, subject: str, order: Sequence[Target], install_hint: str) -> None:
        """Manifest present, parsed, table checks, then the self-test of its host."""
        fix = f"run `{install_hint}`"
        manifest, where, shadowed = self._registered(order)
        if manifest is None:
            looked = ", ".join(
                str(t.registry_key) if t.registry_key else str(t.manifest_path) for t in order
            )
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest present",
                    f"none (looked in {looked})",
                    fix,
                    NOT_FOUND,
                )
            )
            return
        detail = where + (f" (shadows {', '.join(shadowed)})" if shadowed else "")
        try:
            data = json.loads(manifest.read_bytes())
        except FileNotFoundError:
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest present",
                    f"{where}: file missing",
                    fix,
                    NOT_FOUND,
                )
            )
            return
        except (OSError, ValueError) as exc:
            self.add(
                Finding(Status.OK, subject, "manifest present", detail),
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest JSON",
                    f"{manifest}: {exc}",
                    fix,
                    NOT_FOUND,
                ),
            )
            return
        self.add(Finding(Status.OK, subject, "manifest present", detail))
        if not isinstance(data, dict):
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest JSON",
                    "not a JSON object",
                    fix,
                    NOT_FOUND,
                )
            )
            return
        self.add(Finding(Status.OK, subject, "manifest JSON", "valid"))
        from native_host.config import load_config

        ctx = ManifestContext(
            manifest, data, self.os, load_config(self.env).allowed_extension_ids, install_hint
        )
        passed = self._run_manifest_table(subject, ctx)
        if {"path executable", "type"} <= passed and ctx.host_path is not None:
            self.add(*self._self_test(subject, ctx.host_path))

    def _run_manifest_table(self, subject: str, ctx: ManifestContext) -> set[str]:
        passed: set[str] = set()
        for check in MANIFEST_CHECKS:
            if not set(check.needs) <= passed:
                continue
            ok, detail = check.test(ctx)
            if ok:
                passed.add(check.name)
                self.add(Finding(Status.OK, subject, check.name, detail))
            else:
                hint = check.hint.format(install=ctx.install_hint)
                self.add(Finding(check.failure, subject, check.name, detail, hint, check.symptom))
        return passed

    # -- self-test ---------------------------------------------------------------------
    def _self_test(self, subject: str, host: Path) -> list[Finding]:
        """Start the host as Chrome does, once per host path, and reuse the verdict."""
        key = str(host)
        if key not in self._self_tests:
            self._self_tests[key] = run_self_test(host, self.env, self.timeout)
        return [dataclasses.replace(f, subject=subject) for f in self._self_tests[key]]

    # -- Core side ---------------------------------------------------------------------
    def check_core(self) -> None:
        """runtime.json, a Core ping, app-launch.json: the last decides how bad a dead
        Core is (the host starts Pedelec Desktop itself when it can)."""
        home = Path(paths.pedelec_home(self.env))
        runtime, runtime_finding = _runtime_finding(home)
        self.add(runtime_finding)
        launch = _launch_finding(self.env)
        reachable = runtime is not None and _ping_core(runtime)
        if reachable:
            self.add(Finding(Status.OK, "core", "Core answers ping", runtime or ""))
        else:
            can_launch = launch.status is Status.OK
            status = Status.WARN if can_launch else Status.FAIL
            detail = (f"no answer at {runtime}" if runtime else "no Core endpoint to try") + (
                "; the host will start Pedelec Desktop in the background" if can_launch else ""
            )
            self.add(
                Finding(
                    status,
                    "core",
                    "Core answers ping",
                    detail,
                    "start Pedelec Desktop once",
                    f"every request fails with {CORE_DOWN}",
                )
            )
        if launch.status is Status.FAIL and reachable:
            launch = dataclasses.replace(launch, status=Status.WARN)
        self.add(
            launch, _policy_finding(self.env), _config_finding(self.env), _log_finding(self.env)
        )


def _install_hint(name: str) -> str:
    return f"pedelec-native-host install --browser {name}"


# --- self-test ------------------------------------------------------------------------
def run_self_test(host: Path, env: Mapping[str, str], timeout: float) -> list[Finding]:
    """Start `host chrome-extension://<official id>/` in its own directory (as Chrome
    does), send one ping frame, read the answer, close stdin and expect a clean exit."""
    from native_host.hostproc import HostProcess, HostProtocolError

    origin = locations.extension_origin(OFFICIAL_EXTENSION_ID)
    try:
        proc = HostProcess([str(host)], [origin], env, cwd=str(host.parent))
    except OSError as exc:
        return [
            Finding(
                Status.FAIL,
                "",
                "host starts",
                f"{host}: {exc}",
                "reinstall, or point --host-path at a working build",
                EXITED,
            )
        ]
    findings: list[Finding] = []
    try:
        try:
            reply = proc.request({"type": "ping", "requestId": PING_ID}, timeout=timeout)
        except TimeoutError:
            return [
                Finding(
                    Status.FAIL,
                    "",
                    "host answers ping",
                    f"no answer within {timeout:g} s",
                    f"see the host log in {paths.log_dir(env)}",
                    "requests never complete (no browser error)",
                )
            ]
        except HostProtocolError as exc:
            return [
                Finding(
                    Status.FAIL,
                    "",
                    "host answers ping",
                    f"bad frame: {exc}",
                    "something writes to the host's stdout; see the host log",
                    COMMUNICATION,
                )
            ]
        except EOFError:
            try:
                code: int | None = proc.proc.wait(EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                code = None  # closed stdout but still running
            return [_exited_early(proc.history, code, proc.stderr)]
        findings.extend(_ping_findings(reply))
        findings.append(_exit_finding(proc))
    finally:
        _kill(proc.proc)
    return findings


def _kill(process: subprocess.Popen[bytes]) -> None:
    """What Chrome does to a host still running after its port closed."""
    if process.poll() is None:
        process.kill()
    process.wait()


def _exited_early(frames: Sequence[dict[str, Any]], code: int | None, stderr: str) -> Finding:
    error = next((f.get("error") for f in frames if isinstance(f.get("error"), dict)), None)
    detail = f"exited with status {code} before answering"
    hint = "see the host log, or run the manifest's path by hand to see its error"
    if isinstance(error, dict):
        detail += f": {error.get('code')} {error.get('message')}"
        hint = "allow the extension with `pedelec-native-host install --extension-id ID`"
    elif stderr.strip():
        detail += f"; stderr: {stderr.strip().splitlines()[-1]}"
    return Finding(Status.FAIL, "", "host answers ping", detail, hint, EXITED)


def _ping_findings(reply: Mapping[str, Any]) -> list[Finding]:
    """A well-formed response proves the host works; a Core error is reported apart."""
    if reply.get("ok") is True:
        return [Finding(Status.OK, "", "host answers ping", "ok; Core connected through the host")]
    error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    assert isinstance(error, dict)
    stage = (
        error.get("details", {}).get("stage") if isinstance(error.get("details"), dict) else None
    )
    return [
        Finding(Status.OK, "", "host answers ping", "ok (well-formed response frame)"),
        Finding(
            Status.WARN,
            "",
            "Core through the host",
            f"{error.get('code')}: {error.get('message')}" + (f" (stage {stage})" if stage else ""),
            "see the core checks below",
            f"requests fail with {error.get('code')}",
        ),
    ]


def _exit_finding(proc: Any) -> Finding:
    proc.close_stdin()
    try:
        code = proc.wait(EXIT_GRACE_S)
    except subprocess.TimeoutExpired:
        return Finding(
            Status.WARN,
            "",
            "host exits on EOF",
            f"still running {EXIT_GRACE_S:g} s after stdin closed",
            "Chrome kills it after about 2 s; see the host log",
        )
    if code != 0:
        return Finding(
            Status.WARN,
            "",
            "host exits on EOF",
            f"exit status {code}, expected 0",
            "see the host log",
        )
    return Finding(Status.OK, "", "host exits on EOF", "exit status 0")


# --- Core-side checks -----------------------------------------------------------------
def _runtime_finding(home: Path) -> tuple[str | None, Finding]:
    """Parse `runtime.json` with the host's own reader; return the endpoint if usable."""
    from native_host.core import discovery

    path = home / paths.RUNTIME_FILE
    try:
        endpoint = discovery.read_runtime(home)
    except discovery.CoreUnreachableError as exc:
        reason = str(exc.details.get("reason", exc))
        status = Status.WARN if "not found" in reason or "stale" in reason else Status.FAIL
        return None, Finding(
            status,
            "core",
            "runtime.json",
            f"{path}: {reason}",
            "start Pedelec Desktop (it rewrites runtime.json)",
            CORE_DOWN,
        )
    return endpoint.endpoint, Finding(
        Status.OK, "core", "runtime.json", f"{path}: {endpoint.endpoint}, pid {endpoint.pid}"
    )


def _ping_core(endpoint: str) -> bool:
    """A Core answers `{"requestId":"doctor","type":"ping","payload":{}}` with ok:true."""
    host, _, port = endpoint.rpartition(":")
    request = b'{"requestId":"doctor","type":"ping","payload":{}}\n'
    try:
        with socket.create_connection((host, int(port)), timeout=CORE_TIMEOUT_S) as sock:
            sock.sendall(request)
            line = sock.makefile("rb").readline(MAX_CORE_LINE + 2)
        reply = json.loads(line)
    except (OSError, ValueError):
        return False
    return isinstance(reply, dict) and reply.get("ok") is True


_VIOLATIONS = {
    "version": "version must be 1",
    "executablePath": "executablePath must be an absolute path to an existing regular file",
    "backgroundArgs": 'backgroundArgs must be exactly ["--background"]',
    "executablePermissions": "the executable is group- or other-writable (chmod go-w it)",
}


def _launch_finding(env: Mapping[str, str]) -> Finding:
    from native_host.errors import HostError
    from native_host.launch import config as launcher

    path = Path(paths.pedelec_home(env)) / paths.LAUNCH_CONFIG_FILE
    try:
        config = launcher.read_launch_config(path)
    except HostError as exc:
        details = exc.details
        reason = str(details.get("reason", exc.message))
        violation = details.get("violation")
        why = _VIOLATIONS.get(str(violation), str(details.get("detail", "")))
        missing = not path.exists()
        return Finding(
            Status.WARN if missing else Status.FAIL,
            "core",
            "app-launch.json",
            f"{path}: {reason}" + (f" ({why})" if why and not missing else ""),
            "start Pedelec Desktop once in the foreground (it rewrites app-launch.json)",
            f"{CORE_DOWN} with details.reason {reason!r} whenever Desktop is not running",
        )
    return Finding(Status.OK, "core", "app-launch.json", f"{path}: {config.executable_path}")


def _policy_finding(env: Mapping[str, str]) -> Finding:
    path = Path(paths.config_dir(env)) / paths.POLICY_FILE
    hint = "fix the file or remove it (default: mode extension)"
    error = "ORIGIN_NOT_APPROVED (policy_invalid) for every page request"
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return Finding(Status.OK, "policy", "origins.json", f"{path}: absent (mode extension)")
    except (OSError, ValueError) as exc:
        return Finding(Status.FAIL, "policy", "origins.json", f"{path}: {exc}", hint, error)
    problems = []
    if not isinstance(data, dict):
        problems.append("not a JSON object")
    else:
        if data.get("version") != 1:
            problems.append(f"version {data.get('version')!r}, expected 1")
        if data.get("mode", "extension") not in ("extension", "strict"):
            problems.append(f"mode {data.get('mode')!r}, expected extension or strict")
        problems += [
            f"{k} is not a list"
            for k in ("approved", "blocked")
            if not isinstance(data.get(k, []), list)
        ]
    if problems:
        return Finding(
            Status.FAIL, "policy", "origins.json", f"{path}: {'; '.join(problems)}", hint, error
        )
    assert isinstance(data, dict)
    return Finding(
        Status.OK,
        "policy",
        "origins.json",
        f"{path}: mode {data.get('mode', 'extension')}, "
        f"{len(data.get('approved', []))} approved, {len(data.get('blocked', []))} blocked",
    )


def _config_finding(env: Mapping[str, str]) -> Finding:
    from native_host.config import load_config

    path = Path(paths.config_dir(env)) / paths.CONFIG_FILE
    config = load_config(env)
    if config.problems:
        return Finding(
            Status.WARN,
            "config",
            "config.json",
            "; ".join(config.problems),
            "fix the file; until then only the official extension is allowed",
            f"{EXITED} for any other extension",
        )
    ids = ", ".join(config.allowed_extension_ids) or "none"
    state = "present" if path.exists() else "absent (defaults)"
    return Finding(Status.OK, "config", "config.json", f"{path}: {state}; extra ids: {ids}")


def _log_finding(env: Mapping[str, str]) -> Finding:
    directory = Path(paths.log_dir(env))
    if not directory.exists():
        return Finding(Status.OK, "logs", "log location", f"{directory} (created on first start)")
    if not os.access(directory, os.W_OK):
        return Finding(
            Status.WARN,
            "logs",
            "log location",
            f"{directory} is not writable",
            "fix its permissions; the host then runs without a log",
        )
    logs = sorted(p.name for p in directory.iterdir() if p.is_file())
    return Finding(
        Status.OK,
        "logs",
        "log location",
        f"{directory}" + (f" ({', '.join(logs)})" if logs else " (empty)"),
    )


# --- command line -----------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pedelec-native-host doctor",
        description="Check every browser registration, the host itself and the Core.",
    )
    parser.add_argument("--json", action="store_true", help="print a machine-readable list")
    parser.add_argument(
        "--browser", action="extend", nargs="+", metavar="NAME", help="browser to check"
    )
    add_user_data_dir_option(parser, "check")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="how long to wait for the host's ping answer (default 15)",
    )
    return parser


def diagnose(
    doctor: Doctor, browsers: Sequence[str] | None, user_data_dirs: Sequence[Path]
) -> list[Finding]:
    """Run every check: custom profile roots, else the chosen or installed browsers."""
    for directory in user_data_dirs:
        target = locations.custom_target(directory.absolute())
        doctor.check_browser(
            f"profile {directory.name}",
            [target],
            f"pedelec-native-host install --user-data-dir {directory}",
        )
    if not user_data_dirs:
        names = list(browsers) if browsers else doctor.installed_browsers()
        if not names:
            doctor.add(
                Finding(
                    Status.FAIL,
                    "browsers",
                    "browser installed",
                    "no Chromium-based browser found for this user",
                    "pass --browser NAME or --user-data-dir DIR",
                    NOT_FOUND,
                )
            )
        for name in names:
            doctor.check_browser(name, doctor.lookup(name), _install_hint(name))
    doctor.check_core()
    return doctor.findings


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    """Print one line per check (or JSON); exit 1 when a check failed."""
    args = _parser().parse_args(list(argv[1:]))
    stream = out or sys.stdout
    doctor = Doctor(
        sys.platform,
        os.environ,
        locations.home_from_env(os.environ, sys.platform),
        timeout=args.timeout,
    )
    try:
        findings = diagnose(doctor, args.browser, args.user_data_dir)
    except (ValueError, locations.UnsupportedPlatformError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.json:
        rows = [{k: str(v) for k, v in dataclasses.asdict(f).items()} for f in findings]
        stream.write(json.dumps(rows, indent=2) + "\n")
    else:
        stream.writelines(f.line() + "\n" for f in findings)
    return 1 if any(f.status is Status.FAIL for f in findings) else 0
