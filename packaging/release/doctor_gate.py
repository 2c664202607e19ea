"""What the release workflow asserts of an installed artifact's `doctor`:

    python packaging/release/doctor_gate.py <installed executable>

runs `<executable> doctor --json --browser <every browser of this OS it registers>` and
passes when every one of them loads a manifest naming that very executable, the host
answers as Chrome starts it, and nothing fails but what a runner cannot have. `doctor`
itself exits 1 there, rightly: no Pedelec Desktop runs on a CI runner, so its Core does
not answer (`ALLOWED_FAILURES`). Profile and extension lines are warnings on a runner
(no browser profile exists) and are not judged.

The browsers are this checkout's locations table (the one the artifact was built
from): every row of this OS but the sandboxed ones, which `install --browser all` skips
and the MSI does not register (a Flatpak needs `--flatpak`; a Snap cannot start a host).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent

REQUIRED_OK = (
    "manifest present",
    "manifest JSON",
    "host registered",
    "name",
    "type",
    "path absolute",
    "path exists",
    "path executable",
    "path only yours",
    "allowed_origins valid",
    "official extension allowed",
    "host answers ping",
    "host exits on EOF",
)
"""The checks each registered browser must pass: its registration, and the host it
names started as the browser starts it (docs/install.md, the doctor's table)."""
NAMES_THE_HOST = "path exists"
"""The check whose detail is the path the manifest names (resolved, on Windows, against
the manifest's folder)."""
ALLOWED_FAILURES = {
    ("core", "Core answers ping"): "no Pedelec Desktop, so no Core, runs on a CI runner",
}
DOCTOR_TIMEOUT_S = 600
"""Every browser's self-test may wait up to doctor's own 15 s."""

Finding = Mapping[str, object]


def registered_browsers(platform: str = sys.platform) -> list[str]:
    """Every browser `install --browser all` (or the MSI) registers on `platform`."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from native_host.install.locations import Sandbox, rows_for

    return [row.name for row in rows_for(platform) if row.sandbox is Sandbox.NONE]


def same_file(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def findings_of(report: object) -> list[Finding]:
    """The findings of a `doctor --json` report: `{"verdict": ..., "findings": [...]}`."""
    if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
        raise ValueError("not a doctor --json report (no findings list)")
    return [f for f in report["findings"] if isinstance(f, dict)]


def judge(findings: Sequence[Finding], browsers: Iterable[str], host: str) -> list[str]:
    """Every reason the report fails the gate (none: it passes)."""
    problems = []
    for browser in browsers:
        for check in REQUIRED_OK:
            lines = [f for f in findings if f.get("subject") == browser and f.get("check") == check]
            if not lines:
                problems.append(f"{browser}: no `{check}` line")
            for line in lines:
                status, detail = line.get("status"), line.get("detail")
                if status != "ok":
                    problems.append(f"{browser}: {check}: {status}: {detail}")
                elif check == NAMES_THE_HOST and not same_file(str(detail), host):
                    problems.append(f"{browser}: registers {detail}, not {host}")
    for line in findings:
        key = (str(line.get("subject")), str(line.get("check")))
        if line.get("status") == "fail" and key not in ALLOWED_FAILURES:
            problems.append(f"{key[0]}: {key[1]}: fail: {line.get('detail')}")
    return list(dict.fromkeys(problems))  # a required check that fails is said once


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    host = args[0]
    browsers = registered_browsers()
    command = [host, "doctor", "--json", "--browser", *browsers]
    done = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=DOCTOR_TIMEOUT_S, check=False,
    )  # fmt: skip
    sys.stderr.write(done.stderr)
    if done.returncode not in (0, 1):
        print(f"doctor exited {done.returncode} (0 or 1 expected):\n{done.stdout}", file=sys.stderr)
        return 1
    try:
        findings = findings_of(json.loads(done.stdout))
    except ValueError as exc:  # json.JSONDecodeError is one
        print(f"doctor --json printed no report ({exc}):\n{done.stdout}", file=sys.stderr)
        return 1
    for line in findings:
        print(f"{line['status']:<5} {line['subject']:<16} {line['check']}: {line['detail']}")
    problems = judge(findings, browsers, host)
    for (subject, check), why in ALLOWED_FAILURES.items():
        print(f"allowed to fail: {subject} {check} ({why})")
    judged = ", ".join(browsers)
    print(f"doctor exited {done.returncode}; {len(browsers)} browsers judged: {judged}")
    for problem in problems:
        print(f"GATE: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
