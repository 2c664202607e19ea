"""Managed policies as findings: a blocked host, or user-level hosts turned off.

With `NativeMessagingUserLevelHosts` false the browser reads only system-level
registrations, so the fix is the package made for that, named per system
(`SYSTEM_INSTALL`): the per-machine MSI, the system pkg, or the Linux tarball's own
`install --scope system` (docs/install.md, "For administrators").
"""

from __future__ import annotations

import platform

from native_host import __version__
from native_host.install.doctor.report import BLOCKED, NOT_FOUND, Finding, Status
from native_host.install.locations import BrowserRow, Os, Sandbox
from native_host.install.managed_policy import (
    USER_LEVEL,
    Permission,
    PolicyReader,
    Settings,
    evaluate,
    explain,
)

CHECK = "managed policy"
ASK_ADMIN = "ask your administrator to allow cc.isaaclin.pedelec ({policy})"
SYSTEM_INSTALL = {
    Os.WIN32: (
        "install the per-machine MSI as an administrator: "
        "`msiexec /i pedelec-native-host-{version}-x64-machine.msi /qn`"
    ),
    Os.DARWIN: (
        "install the system package as an administrator: "
        "`sudo installer -pkg pedelec-native-host-{version}-system.pkg -target /`"
    ),
    Os.LINUX: (
        "as root, extract pedelec-native-host-{version}-linux-{machine}.tar.gz into /opt and "
        "run `sudo /opt/pedelec-native-host/pedelec-native-host install --scope system "
        "--browser all`"
    ),
}
"""The release artifact that registers the host for every user, per system (`--browser
all`: root has no browser profile for `install` to find). Their names are
packaging/windows/msi_document.py's, packaging/macos/pkg_plan.py's and
packaging/linux/build.py's: tests/test_msi_document.py and
tests/test_release_artifacts.py hold them together."""


def system_install(os_name: Os, version: str = __version__, machine: str = "") -> str:
    """How to register the host where a browser with user-level hosts off looks (the
    Linux tarball is named by the machine's architecture, as `uname -m` says it)."""
    if os_name is Os.LINUX and not machine:
        machine = platform.machine()
    return SYSTEM_INSTALL[os_name].format(version=version, machine=machine)


def read_policy(row: BrowserRow, reader: PolicyReader) -> tuple[Permission, Settings] | None:
    """The family's policies (None: sandboxed, or no known location on this OS)."""
    if row.sandbox is not Sandbox.NONE:
        return None
    settings = reader.read(row.browser)
    if settings is None:
        return None
    return evaluate(settings), settings


def policy_findings(
    subject: str,
    permission: Permission,
    settings: Settings,
    system_manifest: bool,
    install_for_everyone: str,
) -> list[Finding]:
    """What the policy means for this browser; `system_manifest`: a system-level
    manifest is registered (the only kind left when user-level hosts are off);
    `install_for_everyone`: how to register one (`system_install`)."""
    findings = [
        Finding(Status.WARN, subject, CHECK, f"could not read {problem}", "check the file's syntax")
        for problem in settings.problems
    ]
    detail = explain(settings, permission)
    if permission is Permission.DISALLOW:
        hint = ASK_ADMIN.format(policy="add it to NativeMessagingAllowlist")
        findings.append(Finding(Status.FAIL, subject, CHECK, detail, hint, BLOCKED))
    elif permission is Permission.SYSTEM_ONLY and not system_manifest:
        hint = f"{install_for_everyone}; or " + ASK_ADMIN.format(policy=f"set {USER_LEVEL} to true")
        findings.append(Finding(Status.FAIL, subject, CHECK, detail, hint, NOT_FOUND))
    else:
        findings.append(Finding(Status.OK, subject, CHECK, detail))
    return findings
