"""`pedelec-native-host demo` run as a user runs it: a subprocess, both protocol generations.

Each run gets an empty HOME and TMPDIR and no PEDELEC_ or XDG_ variables, so a write outside
the demo's own temporary directory (or one it leaves behind) shows up as a stray file.
`PEDELEC_TEST_HOST_CMD` reaches the demo as `PEDELEC_DEMO_HOST_CMD`, like the other
black-box tests.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.process

STEPS = [
    "ping",
    "list_providers",
    "get_settings",
    "create_thread",
    "subscribe_thread",
    "send_text",
    "tool_round_trip",
    "end_thread",
]
PASSED = re.compile(r"^demo passed: 8 steps in (\d+) ms$")


@dataclass
class DemoRun:
    returncode: int
    stdout: str
    stderr: str
    home: Path
    tmpdir: Path

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]


def run_demo(tmp_path: Path, *args: str, host_cmd: str | None = None) -> DemoRun:
    home, tmpdir = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PEDELEC_", "XDG_"))}
    env.update(HOME=str(home), TMPDIR=str(tmpdir))
    host_cmd = host_cmd or os.environ.get("PEDELEC_TEST_HOST_CMD")
    if host_cmd:
        env["PEDELEC_DEMO_HOST_CMD"] = host_cmd
    proc = subprocess.run(
        [sys.executable, "-m", "native_host", "demo", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return DemoRun(proc.returncode, proc.stdout, proc.stderr, home, tmpdir)


def assert_nothing_left(run: DemoRun) -> None:
    assert list(run.home.iterdir()) == [], "the demo wrote into HOME"
    assert list(run.tmpdir.iterdir()) == [], "the demo left files in TMPDIR"


def fake_host(tmp_path: Path, source: str) -> str:
    """A host command running `source`, outside HOME and TMPDIR."""
    script = tmp_path / "fake_host.py"
    script.write_text(source)
    return shlex.join([sys.executable, str(script)])


@pytest.mark.parametrize("generation", ["current", "legacy"])
def test_transcript_walks_the_whole_session(tmp_path: Path, generation: str) -> None:
    run = run_demo(tmp_path, "--generation", generation)

    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert f"generation {generation}" in out
    for number, step in enumerate(STEPS, start=1):
        assert f"{number} {step}" in out
    assert '"echo: hello"' in out
    assert re.search(r"-> submit_tool_result +demo_8 +toolreq_\S+ -> \{\"counter\":2\}", out)
    assert re.search(r"<- tool_result +seq \d+ +update_counter -> \{\"counter\":2\}", out)
    assert 'returned {\\"counter\\":2}"' in out
    assert re.search(r"<- ended +seq \d+", out)
    assert re.search(r"<- exit 0 in \d+ ms", out)
    assert ("operation_completed" in out) == (generation == "current")
    final = PASSED.match(out.splitlines()[-1])
    assert final, out
    assert int(final.group(1)) < 5000

    temp_dir = re.search(r"^  temp dir  (\S+)", out, re.MULTILINE)
    assert temp_dir and Path(temp_dir.group(1)).parent == run.tmpdir
    assert not Path(temp_dir.group(1)).exists()
    assert_nothing_left(run)


@pytest.mark.parametrize("generation", ["current", "legacy"])
def test_json_lines_carry_steps_and_events(tmp_path: Path, generation: str) -> None:
    run = run_demo(tmp_path, "--json", "--generation", generation)

    assert run.returncode == 0, run.stdout + run.stderr
    records = run.records()
    assert records[0]["kind"] == "start" and records[0]["generation"] == generation
    assert records[-1]["kind"] == "passed" and records[-1]["steps"] == 8
    steps = [r["name"] for r in records if r["kind"] == "step"]
    assert steps == [*STEPS, "exit"]

    requests = {r["requestId"]: r["message"] for r in records if r["kind"] == "request"}
    for message in requests.values():
        page_request = message["type"] not in ("ping", "list_providers", "get_settings")
        assert ("callerOrigin" in message) == page_request
    events = [r["event"] for r in records if r["kind"] == "event"]
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
    tool_call = next(e for e in events if e["type"] == "tool_call")
    assert tool_call["toolName"] == "update_counter" and tool_call["args"] == {"delta": 2}
    submit = next(m for m in requests.values() if m["type"] == "submit_tool_result")
    assert submit["toolRequestId"] == tool_call["requestId"]
    tool_result = next(e for e in events if e["type"] == "tool_result")
    assert tool_result["result"] == {"counter": 2}
    replies = [e["text"] for e in events if e["type"] == "assistant_message"]
    assert replies == ["echo: hello", 'echo: tool update_counter returned {"counter":2}']
    assert events[-1]["type"] == "ended"
    responses = [r for r in records if r["kind"] == "response"]
    assert len(responses) == len(requests) == 9
    assert all(r["frame"]["ok"] for r in responses)
    assert_nothing_left(run)


def test_host_that_exits_at_once_fails_the_first_step(tmp_path: Path) -> None:
    crash = "import sys\nsys.stderr.write('Traceback: boom\\n')\nsys.exit(3)\n"
    run = run_demo(tmp_path, host_cmd=fake_host(tmp_path, crash))

    assert run.returncode == 1
    assert "demo failed at step 1 (ping)" in run.stdout
    assert "expected: the response to ping demo_1" in run.stdout
    assert "received: the host exited with status 3" in run.stdout
    assert "host stderr (last lines):\n    Traceback: boom" in run.stdout
    assert "demo passed" not in run.stdout
    assert_nothing_left(run)


def test_host_printing_to_stdout_is_a_protocol_violation(tmp_path: Path) -> None:
    chatty = "import sys, time\nprint('starting up', flush=True)\ntime.sleep(0.2)\n"
    run = run_demo(tmp_path, "--json", host_cmd=fake_host(tmp_path, chatty))

    assert run.returncode == 1
    failed = run.records()[-1]
    assert failed["kind"] == "failed"
    assert (failed["where"], failed["step"], failed["stepName"]) == ("step 1 (ping)", 1, "ping")
    assert failed["expected"] == "the response to ping demo_1"
    assert failed["received"].startswith("a protocol violation: frame of ")
    assert_nothing_left(run)


def test_missing_host_command_fails_at_start(tmp_path: Path) -> None:
    run = run_demo(tmp_path, host_cmd=str(tmp_path / "no-such-host"))

    assert run.returncode == 1
    assert "demo failed at start" in run.stdout
    assert "no-such-host" in run.stdout
    assert_nothing_left(run)
