"""The doctor's verdict: one line naming the first thing to fix, or "ready".

Each finding may name its cause (`Finding.cause`, a key of `CAUSES`): the table says the
cause in a user's words, whether it is a fault at all, and, for a finding that only
follows from another (a browser's "Core through the host" from the Core's own check),
which finding says it. A cause is said once: the first, most severe finding of it keeps
its symptom and fix, every other one points at that one. A new kind of finding slots in
with one row here and `cause=` on the finding; one without a cause is judged by its own
words (its subject, check and detail).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from native_host.install.doctor.core_side import DESKTOP_CLOSED, DESKTOP_DOWN
from native_host.install.doctor.report import Finding, Status
from native_host.install.doctor.selftest import CORE_THROUGH_HOST


@dataclass(frozen=True)
class Cause:
    """One cause of problems, in a user's words (`{subject}`: the finding's subject)."""

    words: str
    fault: bool = True
    """False: nothing to fix (the verdict stays "ready" and says it as a note)."""
    expected: str = ""
    """When this is the only cause: why it may be just fine."""
    see: tuple[str, str] | None = None
    """The (subject, check) of the finding that says this cause; this one points there."""


CORE_CHECK = ("core", "Core answers ping")
WHILE_CLOSED = "expected while Pedelec Desktop is closed; everything else is ready"

CAUSES: dict[str, Cause] = {
    "install-record": Cause("the install record cannot be trusted"),
    "not-registered": Cause("the host is not registered for {subject}"),
    "registration-broken": Cause("{subject}'s registration of the host is broken"),
    "host-gone": Cause("the program {subject}'s registration names is gone"),
    "host-broken": Cause("the host registered for {subject} does not start or answer"),
    "host-shared": Cause("the host registered for {subject} is where other users can change it"),
    "extension-refused": Cause("the host does not let {subject}'s Pedelec extension in"),
    "desktop-host-back": Cause("Pedelec Desktop registered its own host for {subject} again"),
    "policy-blocked": Cause("a policy of your administrator stops {subject} from starting hosts"),
    "sandboxed": Cause("{subject} runs in a sandbox that cannot start the host"),
    "never-started": Cause("{subject} has never been started on this account"),
    "no-extension": Cause("the Pedelec extension is not installed in {subject}"),
    CORE_THROUGH_HOST: Cause("the host answered, but reached no Core", see=CORE_CHECK),
    DESKTOP_DOWN: Cause("Pedelec Desktop is not running", expected=WHILE_CLOSED),
    DESKTOP_CLOSED: Cause(
        "Pedelec Desktop is not running right now; the host starts it when a page needs it",
        fault=False,
        expected=WHILE_CLOSED,
    ),
    "desktop-unlaunchable": Cause("the host cannot start Pedelec Desktop by itself"),
    "core-squatted": Cause("another program listens where Pedelec Desktop's Core should"),
    "policy-invalid": Cause("the origin policy file is broken, so every page is refused"),
    "config-invalid": Cause("config.json is broken, so only the official extension is let in"),
}


def _problem(finding: Finding) -> bool:
    return finding.status is not Status.OK


def _words(finding: Finding) -> str:
    cause = CAUSES.get(finding.cause)
    if cause is None:
        return f"{finding.subject} {finding.check}: {finding.detail}"
    return cause.words.format(subject=finding.subject)


def _rank(finding: Finding) -> int:
    """Failures before warnings, a fault before what needs no fixing."""
    cause = CAUSES.get(finding.cause)
    needs_fixing = cause is None or cause.fault
    return (0 if finding.status is Status.FAIL else 1) + (0 if needs_fixing else 2)


@dataclass(frozen=True)
class Verdict:
    """The line the report ends with, and where each finding that repeats a cause points."""

    ready: bool
    text: str
    cause: str = ""
    subject: str = ""
    check: str = ""
    fix: str = ""
    note: str = ""
    pointers: dict[int, str] = dataclasses.field(default_factory=dict)
    """Index of a finding -> what it says instead of its symptom and fix."""

    def line(self) -> str:
        return f"verdict: {self.text}"

    def as_dict(self) -> dict[str, object]:
        fields = dataclasses.asdict(self)
        del fields["pointers"]
        return fields


def judge(findings: Sequence[Finding]) -> Verdict:
    """The verdict over every finding (see the module's docstring)."""
    said: dict[tuple[str, str], int] = {}
    pointers: dict[int, str] = {}
    by_check = {(f.subject, f.check): f for f in findings}
    order = sorted(
        (i for i, f in enumerate(findings) if _problem(f)), key=lambda i: _rank(findings[i])
    )
    for index in order:
        finding = findings[index]
        cause = CAUSES.get(finding.cause)
        target = by_check.get(cause.see) if cause is not None and cause.see else None
        if target is not None and _problem(target):
            pointers[index] = f"see `{target.subject} {target.check}`"
            continue
        key = (finding.cause, _words(finding)) if finding.cause else ("", str(index))
        if key in said:
            first = findings[said[key]]
            pointers[index] = f"same cause as `{first.subject} {first.check}`"
        else:
            said[key] = index
    first_index = next(iter(said.values()), None)
    if first_index is None:
        return Verdict(True, "ready", pointers=pointers)
    first = findings[first_index]
    cause = CAUSES.get(first.cause)
    words = _words(first)
    alone = len(said) == 1
    note = cause.expected if cause is not None and alone else ""
    if cause is not None and not cause.fault:
        text = f"ready ({words}" + (f"; {note})" if note else ")")
        return Verdict(True, text, first.cause, first.subject, first.check, "", note, pointers)
    text = f"first fix: {words}" + (f": {first.hint}" if first.hint else "")
    more = len(said) - 1
    if note:
        text += f" ({note})"
    elif more:
        text += f" ({more} other problem{'s' if more > 1 else ''} above)"
    fields = (first.cause, first.subject, first.check, first.hint, note, pointers)
    return Verdict(False, text, *fields)


def render(findings: Sequence[Finding], as_json: bool) -> str:
    """The whole report: one line per finding, then the verdict; or one JSON object with
    the verdict and the list of findings (each with its cause)."""
    judged = judge(findings)
    if as_json:
        rows = [{k: str(v) for k, v in dataclasses.asdict(f).items()} for f in findings]
        return json.dumps({"verdict": judged.as_dict(), "findings": rows}, indent=2) + "\n"
    lines = [f.line(judged.pointers.get(i, "")) for i, f in enumerate(findings)]
    return "".join(line + "\n" for line in lines) + judged.line() + "\n"
