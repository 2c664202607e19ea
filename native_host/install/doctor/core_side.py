"""The Core side: `runtime.json`, a Core ping, `app-launch.json`, the origin policy,
`config.json` and the log directory.

Every file is judged by the host's own reader (`read_runtime`, `read_launch_config`,
`PolicyStore.problem`, `load_config`) and the Core is pinged through the host's own
gateway (with its check of who is listening), so what the host refuses, doctor reports,
in the host's words.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from native_host import paths
from native_host.install.doctor.report import CORE_DOWN, EXITED, Finding, Status

DESKTOP_CLOSED = "desktop-closed"
"""`verdict.CAUSES`: the Desktop is not running, and the host can start it."""
DESKTOP_DOWN = "desktop-down"
"""`verdict.CAUSES`: the Desktop is not running, and the host cannot start it."""

CORE_TIMEOUT_S = 3.0
REFUSED = "refused: "
"""How a listener the host will not write to is reported (the peer check's reason follows)."""
OPEN_DESKTOP_ONCE = (
    "open Pedelec Desktop once so it records how to start it in the background "
    "(it writes app-launch.json)"
)


def ping_core(env: Mapping[str, str]) -> tuple[bool, str]:
    """The gateway's own ping, without launching anything: (answered ok, endpoint or why
    not). A listener the host would refuse (another user's, another process's) is
    reported with the host's reason."""
    from native_host.config import load_config
    from native_host.core.discovery import CoreUnreachableError
    from native_host.errors import HostError
    from native_host.gateway import CoreGateway

    gateway = CoreGateway(load_config(env), env)
    try:
        endpoint, _ = gateway.ping(CORE_TIMEOUT_S)
    except CoreUnreachableError as exc:
        details = exc.details
        why = str(details.get("reason") or details.get("error") or exc.stage)
        refused = exc.stage == "verify_core"
        return False, (REFUSED if refused else "") + why
    except HostError as exc:
        reason = exc.details.get("error") or exc.details.get("reason")
        return False, f"{exc.code}: {exc.message}" + (f" ({reason})" if reason else "")
    finally:
        gateway.close_all()
    return True, endpoint.endpoint


def runtime_finding(env: Mapping[str, str]) -> Finding:
    """`runtime.json` as the host reads it (spec 3.1, stale pid included)."""
    from native_host.core import discovery

    home = paths.pedelec_home(env)
    path = os.path.join(home, paths.RUNTIME_FILE)
    try:
        endpoint = discovery.read_runtime(home)
    except discovery.CoreUnreachableError as exc:
        reason = str(exc.details.get("reason", exc))
        absent = "not found" in reason or "stale" in reason
        return Finding(
            Status.WARN if absent else Status.FAIL,
            "core",
            "runtime.json",
            f"{path}: {reason}",
            "start Pedelec Desktop (it rewrites runtime.json)",
            CORE_DOWN,
        )
    return Finding(
        Status.OK, "core", "runtime.json", f"{path}: {endpoint.endpoint}, pid {endpoint.pid}"
    )


_VIOLATIONS = {
    "version": "version must be 1",
    "executablePath": "executablePath must be an absolute path to an existing regular file",
    "backgroundArgs": 'backgroundArgs must be exactly ["--background"]',
}
"""Violations whose fix is about the file's content; the others carry their own sentence
(`error`: which file or directory belongs to whom or is writable by others)."""


def launch_finding(env: Mapping[str, str]) -> Finding:
    """`app-launch.json` through the launcher's own reader and its §4.3 reasons."""
    from native_host.errors import HostError
    from native_host.launch.config import read_launch_config

    path = os.path.join(paths.pedelec_home(env), paths.LAUNCH_CONFIG_FILE)
    try:
        config = read_launch_config(path, env)
    except HostError as exc:
        details = exc.details
        reason = str(details.get("reason", exc.message))
        why = _VIOLATIONS.get(
            str(details.get("violation")), str(details.get("error") or details.get("detail", ""))
        )
        missing = not os.path.lexists(path)
        symptom = f"{CORE_DOWN} with details.reason {reason!r} whenever it is not running"
        if missing:
            return Finding(
                Status.WARN,
                "core",
                "app-launch.json",
                f"{path}: {reason} (absent)",
                OPEN_DESKTOP_ONCE,
                symptom,
            )
        return Finding(
            Status.FAIL,
            "core",
            "app-launch.json",
            f"{path}: {reason}" + (f" ({why})" if why else ""),
            "start Pedelec Desktop once in the foreground (it rewrites app-launch.json)",
            symptom,
        )
    return Finding(Status.OK, "core", "app-launch.json", f"{path}: {config.executable_path}")


def core_findings(env: Mapping[str, str]) -> list[Finding]:
    """A Core ping, runtime.json, app-launch.json: the last decides how bad a dead Core is
    (the host starts Pedelec Desktop itself when it can). The ping's line says the cause;
    runtime.json and app-launch.json, when they only follow from it, point there."""
    runtime = runtime_finding(env)
    launch = launch_finding(env)
    reachable, what = ping_core(env) if runtime.status is Status.OK else (False, "")
    if reachable:
        ping = Finding(Status.OK, "core", "Core answers ping", what)
        if launch.status is Status.FAIL:  # only matters once the Desktop is closed
            launch = Finding(Status.WARN, *_fields(launch))
        return [ping, runtime, launch]
    can_launch = launch.status is Status.OK
    refused = what.startswith(REFUSED)
    if refused:
        cause = "core-squatted"
        hint = (
            "start Pedelec Desktop: its Core listens on a new port, and the host never "
            "writes to this listener; if it keeps coming back, tell whoever runs this "
            "machine that another account is squatting the Core's port"
        )
    elif can_launch:
        cause, hint = DESKTOP_CLOSED, ""  # nothing to do: the host starts it when needed
    else:
        cause = DESKTOP_DOWN
        hint = "start Pedelec Desktop (once it has run, the host can start it by itself)"
    detail = "no answer: " + (what if what else "Pedelec Desktop is not running (no runtime.json)")
    if can_launch:
        detail += "; the host will start Pedelec Desktop in the background"
    ping = Finding(
        Status.WARN if can_launch else Status.FAIL,
        "core",
        "Core answers ping",
        detail,
        hint,
        "every page request fails with CORE_RUNTIME_UNAVAILABLE" if not can_launch else "",
        cause,
    )
    if runtime.status is Status.WARN:  # absent or stale: the Desktop is not running
        runtime = dataclasses.replace(runtime, cause=cause)
    if launch.status is Status.WARN and not refused:  # absent: why the host cannot start it
        launch = dataclasses.replace(launch, cause=cause)
    elif launch.status is Status.FAIL:
        launch = dataclasses.replace(launch, cause="desktop-unlaunchable")
    return [ping, runtime, launch]


def _fields(finding: Finding) -> tuple[str, str, str, str, str]:
    return finding.subject, finding.check, finding.detail, finding.hint, finding.symptom


def origin_policy_finding(env: Mapping[str, str]) -> Finding:
    """`origins.json` judged by the relay's own `PolicyStore`: a file it refuses makes
    every page request fail closed."""
    from native_host.policy import PolicyStore

    store = PolicyStore.for_env(env)
    problem = store.problem()
    if problem is not None:
        return Finding(
            Status.FAIL,
            "policy",
            "origins.json",
            problem,
            "fix the file or remove it (default: mode extension)",
            "ORIGIN_NOT_APPROVED (policy_invalid) for every page request",
            "policy-invalid",
        )
    if not os.path.lexists(store.path):
        return Finding(
            Status.OK, "policy", "origins.json", f"{store.path}: absent (mode extension)"
        )
    listing = store.list()
    return Finding(
        Status.OK,
        "policy",
        "origins.json",
        f"{store.path}: mode {listing.get('mode')}, {len(listing.get('approved', []))} approved, "
        f"{len(listing.get('blocked', []))} blocked",
    )


def config_finding(env: Mapping[str, str]) -> Finding:
    """`config.json` and the environment overrides, as `load_config` takes them."""
    from native_host.config import load_config

    path = os.path.join(paths.config_dir(env), paths.CONFIG_FILE)
    config = load_config(env)
    if config.problems:
        return Finding(
            Status.WARN,
            "config",
            "config.json",
            "; ".join(config.problems),
            "fix the file; until then only the official extension is allowed",
            f"{EXITED} for any other extension",
            "config-invalid",
        )
    ids = ", ".join(config.allowed_extension_ids) or "none"
    state = "present" if os.path.lexists(path) else "absent (defaults)"
    return Finding(Status.OK, "config", "config.json", f"{path}: {state}; extra ids: {ids}")


def log_finding(env: Mapping[str, str]) -> Finding:
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
