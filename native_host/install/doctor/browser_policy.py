"""Managed policies as findings: a blocked host, or user-level hosts turned off."""

from __future__ import annotations

from native_host.install.doctor.report import BLOCKED, NOT_FOUND, Finding, Status
from native_host.install.locations import BrowserRow, Sandbox
from native_host.install.managed_policy import (
    Permission,
    PolicyReader,
    Settings,
    evaluate,
    explain,
)

CHECK = "managed policy"
ASK_ADMIN = "ask your administrator to allow cc.isaaclin.pedelec ({policy})"


def read_policy(row: BrowserRow, reader: PolicyReader) -> tuple[Permission, Settings] | None:
    """The family's policies (None: sandboxed, or no known location on this OS)."""
    if row.sandbox is not Sandbox.NONE:
        return None
    settings = reader.read(row.browser)
    if settings is None:
        return None
    return evaluate(settings), settings


def policy_findings(
    subject: str, permission: Permission, settings: Settings, system_manifest: bool
) -> list[Finding]:
    """What the policy means for this browser; `system_manifest`: a system-level
    manifest is registered (the only kind left when user-level hosts are off)."""
    findings = [
        Finding(Status.WARN, subject, CHECK, f"could not read {problem}", "check the file's syntax")
        for problem in settings.problems
    ]
    detail = explain(settings, permission)
    if permission is Permission.DISALLOW:
        hint = ASK_ADMIN.format(policy="add it to NativeMessagingAllowlist")
        findings.append(Finding(Status.FAIL, subject, CHECK, detail, hint, BLOCKED))
    elif permission is Permission.SYSTEM_ONLY and not system_manifest:
        hint = (
            "install for every user: `sudo pedelec-native-host install --scope system` "
            "(Administrator on Windows); or "
            + ASK_ADMIN.format(policy="set NativeMessagingUserLevelHosts to true")
        )
        findings.append(Finding(Status.FAIL, subject, CHECK, detail, hint, NOT_FOUND))
    else:
        findings.append(Finding(Status.OK, subject, CHECK, detail))
    return findings
