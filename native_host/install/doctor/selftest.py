"""Start the registered host exactly as Chrome does and exchange one `ping`.

Whatever the host does — answers, exits at once, hangs, writes garbage, closes its pipes —
becomes findings with the browser's words and the cause found, never an exception.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from native_host import OFFICIAL_EXTENSION_ID, RELEASES_URL, paths
from native_host.hostproc import HostProcess, HostProtocolError
from native_host.install import locations
from native_host.install.contents import launcher_interpreter
from native_host.install.doctor.report import COMMUNICATION, EXITED, Finding, Status
from native_host.usage import interrupts_held

PING_ID = "doctor_ping"
CORE_THROUGH_HOST = "core-through-host"
"""`verdict.CAUSES`: said by the Core's own check."""
EXIT_GRACE_S = 3.0
MAX_SCRIPT_BYTES = 65_536
REINSTALL = (
    f"install it again for real use (a release from {RELEASES_URL}, or `pipx install` a "
    "wheel or a checkout of the source), then run `pedelec-native-host install` from there"
)


@dataclass(frozen=True)
class Exit:
    """What is known about a host that exited before answering."""

    host: Path
    code: int | None
    stderr: str

    @property
    def first_stderr_line(self) -> str:
        return next((line.strip() for line in self.stderr.splitlines() if line.strip()), "")

    def interpreter(self) -> str | None:
        """The interpreter, when the host is a launcher `install` wrote."""
        try:
            with self.host.open("rb") as handle:
                text = handle.read(MAX_SCRIPT_BYTES).decode("utf-8", "replace")
        except OSError:
            return None
        return launcher_interpreter(text, str(self.host.parent))


def _interpreter_gone(facts: Exit) -> tuple[str, str] | None:
    python = facts.interpreter()
    if python is None or Path(python).exists():
        return None
    return f"the launcher's interpreter {python} is gone (was its venv deleted?)", REINSTALL


def _package_gone(facts: Exit) -> tuple[str, str] | None:
    if "No module named native_host" not in facts.stderr:
        return None
    python = facts.interpreter() or "its interpreter"
    return f"{python} cannot import native_host: the package was removed from it", REINSTALL


BUNDLE_BROKEN = {
    "[PYI-": "its _internal directory is missing or damaged",
    "Failed to load Python shared library": "its _internal directory is missing or damaged",
    "_internal": "its _internal directory is missing or damaged",
    "(Windows error ": "its interpreter cannot be loaded",
}
"""What each frozen bundle prints when it cannot start its interpreter: PyInstaller's
bootloader, or the Windows bundle's own executable (packaging/windows/launcher.c)."""


def _bundle_broken(facts: Exit) -> tuple[str, str] | None:
    found = [why for marker, why in BUNDLE_BROKEN.items() if marker in facts.stderr]
    if not found:
        return None
    return (
        f"the frozen bundle around {facts.host} is incomplete ({found[0]})",
        "reinstall it (the MSI on Windows: repair it from Settings > Apps; "
        "installers/install.sh or the release tarball elsewhere)",
    )


def _status_word(facts: Exit) -> tuple[str, str] | None:
    words = {127: "a program it runs was not found", 126: "a program it runs is not executable"}
    if facts.code not in words:
        return None
    assert facts.code is not None
    return f"{words[facts.code]} (exit status {facts.code})", "run the manifest's path by hand"


CAUSES: tuple[Callable[[Exit], tuple[str, str] | None], ...] = (
    _interpreter_gone,
    _package_gone,
    _bundle_broken,
    _status_word,
)
"""Most specific first; the first that recognises the exit explains it."""


def _exited_early(frames: Sequence[dict[str, Any]], facts: Exit) -> Finding:
    error = next((f.get("error") for f in frames if isinstance(f.get("error"), dict)), None)
    state = "still running" if facts.code is None else f"status {facts.code}"
    detail = f"closed stdout before answering ({state})"
    hint = "see the host log, or run the manifest's path by hand to see its error"
    if isinstance(error, dict):
        detail += f": {error.get('code')} {error.get('message')}"
        hint = "allow the extension with `pedelec-native-host install --extension-id ID`"
    else:
        cause = next((found for found in (c(facts) for c in CAUSES) if found), None)
        if cause is not None:
            detail += f": {cause[0]}"
            hint = cause[1]
    if facts.first_stderr_line:
        detail += f"; stderr: {facts.first_stderr_line}"
    return Finding(Status.FAIL, "", "host answers ping", detail, hint, EXITED)


def _ping_findings(reply: Mapping[str, Any]) -> list[Finding]:
    """A well-formed response proves the host works; a Core error is reported apart."""
    if reply.get("ok") is True:
        return [Finding(Status.OK, "", "host answers ping", "ok; Core connected through the host")]
    error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    assert isinstance(error, dict)
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    assert isinstance(details, dict)
    stage = details.get("stage")
    where = f"{error.get('code')}" + (f" at stage {stage}" if stage else "")
    return [
        Finding(Status.OK, "", "host answers ping", "ok (well-formed response frame)"),
        Finding(
            Status.WARN,
            "",
            "Core through the host",
            f"the host answered, but reached no Core ({where})",
            "see the core checks below",
            f"requests fail with {error.get('code')}",
            CORE_THROUGH_HOST,
        ),
    ]


def _exit_finding(proc: HostProcess) -> Finding:
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


def _kill(host: HostProcess) -> None:
    """What Chrome does to a host still running after its port closed; then every pipe
    to it is closed here, not by the garbage collector."""
    if host.proc.poll() is None:
        host.proc.kill()
    host.proc.wait()
    host.close()


def run_self_test(host: Path, env: Mapping[str, str], timeout: float) -> list[Finding]:
    """Start `host chrome-extension://<official id>/` in its own directory (as Chrome
    does), send one ping frame, read the answer, close stdin and expect a clean exit."""
    origin = locations.extension_origin(OFFICIAL_EXTENSION_ID)
    proc: HostProcess | None = None
    try:
        with interrupts_held():  # a Ctrl-C from here on still ends the host
            proc = HostProcess([str(host)], [origin], env, cwd=str(host.parent))
    except OSError as exc:
        # A launcher whose `#!` interpreter is gone cannot be executed at all (ENOENT);
        # Chrome's forked child then exits 127, so the browser says "exited".
        detail = f"{host}: {exc.strerror or exc}"
        hint = "reinstall, or point --host-path at a working build"
        gone = _interpreter_gone(Exit(host, None, ""))
        if gone is not None:
            detail, hint = f"{detail}: {gone[0]}", gone[1]
        return [Finding(Status.FAIL, "", "host starts", detail, hint, EXITED)]
    except KeyboardInterrupt:
        if proc is not None:
            _kill(proc)
        raise
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
        except EOFError:  # stdout closed, or stdin no longer read (HostExitedError)
            try:
                code: int | None = proc.proc.wait(EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                code = None  # closed its pipes but still running
            facts = Exit(host, code, proc.final_stderr())
            return [_exited_early(proc.history, facts)]
        return [*_ping_findings(reply), _exit_finding(proc)]
    finally:
        _kill(proc)
