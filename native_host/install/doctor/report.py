"""The doctor's findings: one `Finding` per check (`verdict` prints them and judges).

Symptoms are what the user would actually see: Chrome's `lastError` text in quotes
(observed in a real Chromium, manifests/README.md), or the error code requests fail with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from native_host.install.managed_policy import BLOCKED_SYMPTOM

NOT_FOUND = '"Specified native messaging host not found."'
FORBIDDEN = '"Access to the specified native messaging host is forbidden."'
EXITED = '"Native host has exited."'
COMMUNICATION = '"Error when communicating with the native messaging host."'
BLOCKED = BLOCKED_SYMPTOM
CORE_DOWN = "CORE_RUNTIME_UNAVAILABLE (Pedelec Desktop is not running)"


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
    cause: str = ""
    """A key of `verdict.CAUSES`: the problem in a user's words, said once."""

    def line(self, see: str = "") -> str:
        """One line; a problem whose cause another line says points there (`see`)
        instead of repeating its symptom and fix."""
        text = f"{self.status.value:<4}  {self.subject:<16} {self.check}: {self.detail}"
        if self.status is not Status.OK:
            if see:
                return f"{text} | {see}"
            if self.symptom:
                text += f" | symptom: {self.symptom}"
            if self.hint:
                text += f" | fix: {self.hint}"
        return text


def exit_status(findings: Sequence[Finding]) -> int:
    """1 when anything blocks use, else 0 (warnings included)."""
    return 1 if any(f.status is Status.FAIL for f in findings) else 0
