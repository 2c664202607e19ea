"""Ctrl-C at any moment of a command: no traceback, exit status 130, nothing left behind
(issue 32).

Each command runs as a user starts it, with its temporary folder and its state in a
directory of the test's own, and gets SIGINT at moments counted from when its code began
(Python's `-X importtime` report of `native_host.usage`, the module that installs the
handling: what comes before it is the interpreter's own start, not the host's code) —
from at once to well into its work — either alone or, as a terminal sends it, with every
process of its group. Afterwards no process carries the run's mark, and the temporary
folder is empty.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from native_host import HOST_NAME
from tests.support.markers import needs_os
from tests.support.world import HostWorld

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="finds what a run left running through /proc/<pid>/environ"),
]

MARK = "PEDELEC_TEST_INTERRUPT_MARK"
READY = "| native_host.usage"
"""The `-X importtime` line printed once the module that installs the handling is loaded."""
LEFTOVER_TIMEOUT_S = 10.0


@dataclass
class Interrupted:
    returncode: int
    stderr: str
    signalled_after_s: float


def processes_marked(mark: str) -> list[int]:
    """Every process whose environment holds the run's mark."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{MARK}={mark}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def interrupt(env: dict[str, str], args: Sequence[str], after_s: float, group: bool) -> Interrupted:
    """Start `pedelec-native-host ARGS`, send SIGINT `after_s` seconds after its code
    began (to the process, or its whole group as a terminal does), wait for the end, and
    check that nothing it started is still running."""
    mark = uuid.uuid4().hex
    child_env = {**env, MARK: mark, "PYTHONPROFILEIMPORTTIME": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "native_host", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
        start_new_session=True,
    )
    assert process.stderr is not None
    early: list[str] = []
    try:
        for line in process.stderr:
            early.append(line)
            if READY in line:
                break
        assert READY in "".join(early), "".join(early)
        started = time.monotonic()
        time.sleep(after_s)
        if group:
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    deadline = time.monotonic() + LEFTOVER_TIMEOUT_S
    while processes_marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_marked(mark) == [], "processes left running after Ctrl-C"
    lines = [*early, *rest.splitlines(keepends=True)]
    stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return Interrupted(code, stderr, time.monotonic() - started)


def assert_interrupted(done: Interrupted, word: str, finished_ok: bool = False) -> None:
    """Exit 130 with the one `interrupted` line. Where `finished_ok`, the command may have
    been done already: exit 0, or, when the signal came while the interpreter itself was
    ending (after the command's code), the end by SIGINT Python gives then, silently."""
    assert "Traceback" not in done.stderr, done.stderr
    if finished_ok and (done.returncode == 0 or (-done.returncode, done.stderr) == (2, "")):
        return
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines()[-1] == f"pedelec-native-host {word}: interrupted"


def empty(directory: Path) -> bool:
    return not any(directory.iterdir())


@pytest.fixture
def run_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The `env` fixture's directories, and a temporary folder of the run's own."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    return {**env, "TMPDIR": str(temp)}


DEMO_MOMENTS = [0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.45]
"""Seconds after the demo's code began: its imports, the dev Core and the host starting,
the session. The whole demo takes about half a second here: from 0.2 s on it may be over
(exit 0); before, it is always still running."""


@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("after_s", DEMO_MOMENTS)
def test_demo(run_env: dict[str, str], after_s: float, group: bool) -> None:
    done = interrupt(run_env, ["demo"], after_s, group)
    assert_interrupted(done, "demo", finished_ok=after_s >= 0.2)
    assert empty(Path(run_env["TMPDIR"])), sorted(Path(run_env["TMPDIR"]).iterdir())


@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.3, 1.5])
def test_dev_core_in_a_temporary_home(run_env: dict[str, str], after_s: float, group: bool) -> None:
    done = interrupt(run_env, ["dev-core"], after_s, group)
    assert_interrupted(done, "dev-core")
    assert empty(Path(run_env["TMPDIR"]))


@pytest.mark.parametrize("after_s", [0.0, 0.1, 1.5])
def test_dev_core_in_a_given_home_takes_its_runtime_json_away(
    run_env: dict[str, str], tmp_path: Path, after_s: float
) -> None:
    home = tmp_path / "dev-home"
    done = interrupt(run_env, ["dev-core", "--home", str(home)], after_s, group=False)
    assert_interrupted(done, "dev-core")
    assert not (home / "runtime.json").exists()
    assert not [p for p in home.glob(".runtime.*")] if home.exists() else True


def hanging_host(path: Path) -> Path:
    """A registered host that never answers: doctor waits for it (its whole --timeout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("after_s", [0.0, 0.1, 0.5, 2.0])
def test_doctor_waiting_for_a_host(
    run_env: dict[str, str], tmp_path: Path, after_s: float, group: bool
) -> None:
    profile = tmp_path / "profile"
    host = hanging_host(tmp_path / "bin" / "host")
    manifest = {
        "name": HOST_NAME,
        "description": "a host that hangs",
        "path": str(host),
        "type": "stdio",
        "allowed_origins": ["chrome-extension://ogccgaminlphbkeghldidiiimajfdpag/"],
    }
    (profile / "NativeMessagingHosts").mkdir(parents=True)
    (profile / "NativeMessagingHosts" / f"{HOST_NAME}.json").write_text(json.dumps(manifest))
    report = tmp_path / "report.txt"
    args = ["doctor", "--user-data-dir", str(profile), "--timeout", "60", "--report", str(report)]
    done = interrupt(run_env, args, after_s, group)
    assert_interrupted(done, "doctor")
    assert not report.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []
    assert empty(Path(run_env["TMPDIR"]))


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.2, 0.5])
def test_install_leaves_only_what_its_record_lists(
    run_env: dict[str, str], tmp_path: Path, after_s: float
) -> None:
    """Interrupted wherever it is, install has written only whole files (no temporary
    one), each listed in its record, so `uninstall` takes every one away again."""
    profile = tmp_path / "profile"
    args = ["install", "--force", "--user-data-dir", str(profile), "--extension-id", "a" * 32]
    done = interrupt(run_env, args, after_s, group=False)
    assert_interrupted(done, "install", finished_ok=True)
    written = {
        p
        for root in (profile, Path(run_env["PEDELEC_NATIVE_HOST_STATE_DIR"]),
                     Path(run_env["PEDELEC_NATIVE_HOST_CONFIG_DIR"]))
        if root.exists()
        for p in root.rglob("*")
        if p.is_file()
    }  # fmt: skip
    assert [p for p in written if p.name.endswith(".tmp")] == []
    record = Path(run_env["PEDELEC_NATIVE_HOST_STATE_DIR"]) / "install-record.json"
    if record.exists():
        removed = subprocess.run(
            [sys.executable, "-m", "native_host", "uninstall"],
            env=run_env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
    left = [p for p in written if p.exists()]
    assert left == [], left
    assert empty(Path(run_env["TMPDIR"]))


@pytest.mark.parametrize(
    "args",
    [["origins", "list"], ["origins", "approve", "https://app.example.com"], ["uninstall"],
     ["version"], ["help", "doctor"]],
    ids=" ".join,
)  # fmt: skip
def test_quick_commands(run_env: dict[str, str], args: list[str]) -> None:
    """Over almost at once: interrupted, or already done; never a traceback."""
    done = interrupt(run_env, args, 0.0, group=False)
    assert_interrupted(done, args[0], finished_ok=True)


def test_a_relay_given_ctrl_c_ends_as_on_sigterm_and_logs_no_crash(
    world: HostWorld, wait_until: Any
) -> None:
    """Chromium starts a host in the browser's own process group, so Ctrl-C in the
    terminal that started the browser reaches every host it runs, mid-request or idle:
    each ends at once, as on SIGTERM, and its log holds no "uncaught exception" and no
    traceback (`HostWorld.close` fails on one)."""
    core = world.start_core("legacy", hang_types={"send_text"})
    idle, busy = world.start_host(), world.start_host()
    assert idle.request({"type": "ping", "requestId": "p"})["ok"]
    busy.send({"type": "send_text", "requestId": "hang", "threadId": "t1", "message": "x"})
    assert wait_until(lambda: len(core.requests("send_text")) == 1)
    for host in (idle, busy):
        host.proc.send_signal(signal.SIGINT)
    assert [idle.wait(5), busy.wait(5)] == [-signal.SIGINT, -signal.SIGINT]
    log = world.log_text()
    assert "uncaught" not in log and "KeyboardInterrupt" not in log, log[-3000:]
