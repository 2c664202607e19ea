"""Sandboxed browsers: a Snap cannot work at all; a Flatpak works only when every piece
of the wrapper chain is in place (spec 5.4).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path, PurePath

from native_host.install import flatpak, locations
from native_host.install.doctor.report import EXITED, NOT_FOUND, Finding, Status
from native_host.install.locations import BrowserRow

MAX_WRAPPER_BYTES = 65_536


def snap_finding(row: BrowserRow) -> Finding:
    """A Snap browser found: say it cannot work, and what can."""
    return Finding(
        Status.FAIL,
        row.name,
        "sandbox",
        f"{row.label} cannot start a native messaging host outside its Snap confinement",
        f"use the {row.browser} .deb or vendor package, or its Flatpak with "
        "`pedelec-native-host install --flatpak`; or check another browser with --browser NAME",
        NOT_FOUND,
    )


def flatpak_findings(
    row: BrowserRow, wrapper: Path, env: Mapping[str, str], home: PurePath
) -> tuple[list[Finding], Path | None]:
    """Each piece a Flatpak browser needs; returns the findings and the host the wrapper
    starts outside the sandbox (the one to self-test), if it is known."""
    subject = row.name
    hint = f"run `pedelec-native-host install --flatpak --browser {row.name}`"
    app_dir = locations.flatpak_app_dir(home, row.sandbox_id)
    findings: list[Finding] = []
    if not PurePath(str(wrapper)).is_relative_to(str(app_dir)):
        findings.append(
            Finding(
                Status.FAIL,
                subject,
                "wrapper inside the sandbox",
                f"{wrapper} is outside {app_dir}, which is all the sandbox sees of your home",
                hint,
                NOT_FOUND,
            )
        )
        return findings, None
    findings.append(Finding(Status.OK, subject, "wrapper inside the sandbox", str(wrapper)))
    try:
        text = wrapper.read_bytes()[:MAX_WRAPPER_BYTES].decode("utf-8", "replace")
    except OSError as exc:
        text = f"unreadable: {exc.strerror}"
    target = flatpak.wrapper_target(text)
    host = Path(target) if target else None
    if host is None or not host.is_file():
        detail = (
            f"{wrapper} is not a wrapper `install --flatpak` wrote"
            if host is None
            else f"{wrapper} starts {host}, which does not exist"
        )
        findings.append(
            Finding(Status.FAIL, subject, "wrapper starts the host", detail, hint, EXITED)
        )
        host = None
    else:
        findings.append(
            Finding(Status.OK, subject, "wrapper starts the host", f"{host} (outside the sandbox)")
        )
    findings.append(_permission(row, env, home))
    findings.append(_session_helper(env))
    return findings, host


def _permission(row: BrowserRow, env: Mapping[str, str], home: PurePath) -> Finding:
    """The override that lets the app talk to org.freedesktop.Flatpak (user, then system)."""
    command = shlex.join(flatpak.grant_command(row.sandbox_id))
    for path in map(Path, locations.flatpak_override_paths(env, home, row.sandbox_id)):
        try:
            text = path.read_bytes()[:MAX_WRAPPER_BYTES].decode("utf-8", "replace")
        except OSError:
            continue
        if flatpak.grants_talk(text):
            return Finding(
                Status.OK,
                row.name,
                "flatpak permission",
                f"{path} grants {flatpak.TALK_NAME}",
            )
    return Finding(
        Status.FAIL,
        row.name,
        "flatpak permission",
        f"{row.label} may not talk to {flatpak.TALK_NAME}, so `flatpak-spawn --host` fails",
        f"run `{command}` ({flatpak.cost(row.label, row.sandbox_id)}), or install again "
        "with --flatpak-grant",
        EXITED,
    )


def _session_helper(env: Mapping[str, str]) -> Finding:
    """The host side of `flatpak-spawn --host`: flatpak's session helper service."""
    service = flatpak.session_helper_service(env)
    if service is None:
        return Finding(
            Status.FAIL,
            "flatpak",
            "flatpak-spawn usable",
            f"no {flatpak.TALK_NAME} D-Bus service on this machine (flatpak's session helper), "
            "so `flatpak-spawn --host` cannot start anything",
            "install your distribution's `flatpak` package",
            EXITED,
        )
    return Finding(Status.OK, "flatpak", "flatpak-spawn usable", f"{flatpak.TALK_NAME}: {service}")
