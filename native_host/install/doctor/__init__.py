"""`pedelec-native-host doctor`: say what stops the host from working, in the words the
browser would use, with a fix for each problem.

By concern: `report` (findings and printing), `manifests` (which manifest a browser
loads and whether Chrome accepts it), `sandbox` (Snap and Flatpak), `browser_policy`
(managed policies), `selftest` (the registered host started as Chrome does),
`extensions` (the other end of the port: Pedelec in each browser profile, read by the
pure `profile_prefs`), `core_side` (the Core, through the host's own readers), `verdict`
(each cause in a user's words, said once, and the first thing to fix), `bug_report`
(`--report FILE`: the redacted file for a bug report), `cli` (what to check, and the
command line).
"""

from __future__ import annotations

from native_host.install.doctor.cli import Doctor, diagnose, main
from native_host.install.doctor.report import Finding, Status

__all__ = ["Doctor", "Finding", "Status", "diagnose", "main"]
