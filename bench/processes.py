"""Process-level measurements of one host variant against the in-process dev Core.

- `spawn_to_ping`: spawn the host as Chrome does (argv: the extension origin), write one
  `ping` frame at once, and time until its answer is read from stdout;
- `session`: start, ping, wait, read the idle RSS, subscribe to a thread, have the Core
  write `count` event lines on that stream (one `send` per line, as fast as the Core can),
  wait for every event frame, read the high-water RSS, close stdin, and take the host's
  own CPU time (user + system, every thread) from `wait4`'s resource usage.

CPU per event is (CPU of a flood session - CPU of an idle session of the same round) /
events: start-up, ping, subscribe and exit cancel out.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

from native_host.devcore import DevCore
from native_host.hostproc import OFFICIAL_ORIGIN

_PREFIX = struct.Struct("<I")
PARSE_LIMIT = 65_536
"""Frames up to this size are parsed; larger ones are classified by their ends."""
SETTLE_S = 0.2
"""Pause after the first answer before the idle RSS is read (threads finish, pages settle)."""
WAIT_S = 120.0


def user_env(base: Mapping[str, str], root: Path) -> dict[str, str]:
    """An environment like a user's, inside `root`: no PEDELEC_* or XDG_* variables, so the
    host finds its dirs the way it does for users (platformdirs included), under
    HOME=<root>/home; the Pedelec home is then <root>/home/.pedelec."""
    env = {k: v for k, v in base.items() if not k.startswith(("PEDELEC_", "XDG_"))}
    home, runtime = root / "home", root / "run"
    home.mkdir(parents=True)
    runtime.mkdir(mode=0o700)
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
    return env


def pedelec_home(env: Mapping[str, str]) -> Path:
    """Where the dev Core must write runtime.json for hosts started with `env`."""
    return Path(env.get("PEDELEC_HOME") or Path(env["HOME"]) / ".pedelec")


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _PREFIX.pack(len(body)) + body


PING = frame({"type": "ping", "requestId": "bench-ping"})


def spawn_to_ping(command: Sequence[str], env: Mapping[str, str]) -> float:
    """Seconds from spawn to the `ping` answer read back; the host is then closed."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*command, OFFICIAL_ORIGIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(PING)
    proc.stdin.flush()
    prefix = proc.stdout.read(4)
    if len(prefix) < 4:
        _, stderr = proc.communicate(timeout=WAIT_S)
        raise RuntimeError(f"{command[0]} exited ({proc.returncode}) without answering: {stderr!r}")
    reply = json.loads(proc.stdout.read(_PREFIX.unpack(prefix)[0]))
    elapsed = time.perf_counter() - started
    proc.communicate(timeout=WAIT_S)
    if reply.get("ok") is not True:
        raise RuntimeError(f"{command[0]} answered ping with {reply}")
    return elapsed


def proc_status_kib(pid: int, field: str) -> int:
    """A `VmRSS`/`VmHWM` line of /proc/<pid>/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


class FrameReader:
    """Reads the host's stdout on a thread: responses by requestId, events counted."""

    def __init__(self, stdout: IO[bytes]) -> None:
        self.stdout = stdout
        self.responses: dict[str, dict[str, Any]] = {}
        self.events = 0
        self.event_bytes = 0
        self.other: list[bytes] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while len(prefix := self.stdout.read(4)) == 4:
            (size,) = _PREFIX.unpack(prefix)
            body = self.stdout.read(size)
            self._classify(body)
        with self._cond:
            self._cond.notify_all()

    def _classify(self, body: bytes) -> None:
        message: dict[str, Any] | None = None
        if len(body) <= PARSE_LIMIT:
            message = json.loads(body)
            is_event = message.get("type") == "thread_event"
        else:
            is_event = b'"thread_event"' in body[:256] or b'"thread_event"' in body[-256:]
        with self._cond:
            if is_event:
                self.events += 1
                self.event_bytes += len(body)
            elif message is not None and message.get("type") == "response":
                self.responses[str(message.get("requestId"))] = message
            else:
                self.other.append(body[:200])
            self._cond.notify_all()

    def response(self, request_id: str) -> dict[str, Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: request_id in self.responses, WAIT_S):
                raise TimeoutError(f"no response to {request_id}; other frames: {self.other}")
            return self.responses[request_id]

    def wait_events(self, count: int) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.events >= count, WAIT_S):
                raise TimeoutError(f"{self.events} of {count} events arrived")


class Session(NamedTuple):
    """What one host lifetime cost."""

    cpu_s: float
    idle_rss_kib: int
    hwm_kib: int
    events: int
    event_bytes: int


def create_thread(core: DevCore) -> str:
    """A fresh Core thread, asked for directly (not through a host)."""
    with socket.create_connection(("127.0.0.1", core.port), timeout=10) as sock:
        payload = {"provider": "codex"}
        request = {"requestId": "bench-create", "type": "create_thread", "payload": payload}
        sock.sendall(json.dumps(request).encode() + b"\n")
        reply = json.loads(sock.makefile("rb").readline())
    if reply.get("ok") is not True:
        raise RuntimeError(f"create_thread failed: {reply}")
    thread_id: str = reply["result"]["threadId"]
    return thread_id


def event_line(thread_id: str, size: int) -> bytes:
    """A Core `thread_event` line (without newline) of exactly `size` bytes: an
    `assistant_delta`, the most frequent streamed event."""

    def build(text: str) -> bytes:
        event = {"type": "assistant_delta", "seq": 1, "threadId": thread_id, "text": text}
        return json.dumps({"type": "thread_event", "event": event}, separators=(",", ":")).encode()

    padding = size - len(build(""))
    if padding < 0:
        raise ValueError(f"an event line cannot be as small as {size} bytes")
    return build("x" * padding)


def session(
    command: Sequence[str], env: Mapping[str, str], core: DevCore, size: int, count: int
) -> Session:
    """One host lifetime: ping, idle RSS, subscribe, `count` events of `size` bytes, exit."""
    thread_id = create_thread(core)
    line = event_line(thread_id, size)
    proc = subprocess.Popen(
        [*command, OFFICIAL_ORIGIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(env),
    )
    assert proc.stdin is not None and proc.stdout is not None
    reader = FrameReader(proc.stdout)
    try:
        proc.stdin.write(PING)
        proc.stdin.flush()
        reader.response("bench-ping")
        time.sleep(SETTLE_S)
        idle = proc_status_kib(proc.pid, "VmRSS")
        subscribe = {"type": "subscribe_thread", "requestId": "bench-sub", "threadId": thread_id}
        proc.stdin.write(frame(subscribe))
        proc.stdin.flush()
        answer = reader.response("bench-sub")
        if answer.get("ok") is not True:
            raise RuntimeError(f"subscribe_thread failed: {answer}")
        for _ in range(count):
            core.inject_stream_line(thread_id, line)
        reader.wait_events(count)
        hwm = proc_status_kib(proc.pid, "VmHWM")
        proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait(WAIT_S)
    return Session(usage.ru_utime + usage.ru_stime, idle, hwm, reader.events, reader.event_bytes)
