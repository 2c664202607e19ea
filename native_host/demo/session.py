"""The demo's scripted session: talks to the host, checks every answer, emits records.

Each thing that happens (a request sent, a frame received, a step passed, the exit, the
verdict) becomes one `Record`, handed to an `Emit` callback as it happens; the transcript
module formats them and the command line writes them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from native_host.devcore import DevCore, DevCoreSettings
from native_host.hostproc import HostProcess, HostProtocolError, default_host_command, isolated_env
from native_host.usage import interrupts_held

Frame = dict[str, Any]
Record = dict[str, Any]
"""One thing that happened, as a JSON object with a `kind` (the `--json` output line)."""
Emit = Callable[[Record], None]

HOST_CMD_ENV = "PEDELEC_DEMO_HOST_CMD"
"""A path or shell-quoted command to run instead of this checkout's host (e.g. a bundle)."""
PAGE_ORIGIN = "https://demo.pedelec.local"
STEP_TIMEOUT_S = 10.0
EXIT_TIMEOUT_S = 2.0
"""Chrome kills the host about 2 s after closing its stdin (spec 1.1)."""
PROVIDER_CODES = ["codex", "antigravity", "opencode", "cursor", "claude", "ollama"]
TOOL_NAME = "update_counter"
SKILLS = {
    "guidance": "Call update_counter to change the page's counter.",
    "tools": [
        {
            "name": TOOL_NAME,
            "description": "Add delta to a counter",
            "argsSchema": {
                "type": "object",
                "properties": {"delta": {"type": "integer"}},
                "required": ["delta"],
            },
        }
    ],
}
TOOL_MESSAGE = '/tool update_counter {"delta":2}'
RECEIVED_WIDTH = 200
"""A failure's `received` is cut to this many characters."""
LOG_TAIL_LINES = 5


class DemoFailure(Exception):
    """A step did not get what a healthy host and Core give; ends the demo with status 1."""

    def __init__(self, expected: str, received: str) -> None:
        super().__init__(f"expected {expected}, received {received}")
        self.expected = expected
        self.received = received
        self.where = ""
        self.at = time.monotonic()


@dataclass
class Expectation:
    """One frame a step waits for; `frame` is set when it arrives."""

    what: str
    match: Callable[[Frame], bool]
    frame: Frame | None = None


def compact(value: Any) -> str:
    """Compact sorted JSON, the way Core writes it."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def require(condition: bool, expected: str, received: Any) -> None:
    """Fail the current step unless `condition` holds."""
    if not condition:
        raise DemoFailure(expected, shorten(compact(received), RECEIVED_WIDTH))


def shorten(text: str, width: int) -> str:
    """`text`, cut to `width` characters with `...` when longer."""
    return text if len(text) <= width else text[: width - 3] + "..."


def event_of(frame: Frame) -> dict[str, Any]:
    event = frame.get("event") if frame.get("type") == "thread_event" else None
    return event if isinstance(event, dict) else {}


def error_of(message: dict[str, Any]) -> dict[str, Any]:
    """The error object of a response or error event, `{}` if it has none."""
    error = message.get("error")
    return error if isinstance(error, dict) else {}


def is_event(event_type: str, **fields: Any) -> Callable[[Frame], bool]:
    """Matches a `thread_event` of this type whose fields have these values."""

    def match(frame: Frame) -> bool:
        event = event_of(frame)
        return event.get("type") == event_type and all(event.get(k) == v for k, v in fields.items())

    return match


class Session:
    """The demo's side of the port: sends requests, reads and checks every frame."""

    def __init__(self, host: HostProcess, emit: Emit, started: float, generation: str) -> None:
        self.host = host
        self.emit = emit
        self.started = started
        self.current = generation == "current"
        self.thread_id = ""
        self.counter = 0
        self.last_seq = 0
        self.number: int | None = None
        self.name = "start"
        self.deadline = 0.0
        self.passed: list[str] = []
        self.sent: dict[str, tuple[str, float]] = {}
        """requestId -> (type, monotonic send time)."""

    def ms(self, at: float | None = None) -> int:
        return round(((time.monotonic() if at is None else at) - self.started) * 1000)

    def base(self, kind: str) -> Record:
        return {"kind": kind, "tMs": self.ms(), "step": self.number, "stepName": self.name}

    @contextlib.contextmanager
    def step(self, number: int | None, name: str) -> Iterator[None]:
        """Run one step with its own deadline; failures inside it are labelled with it."""
        self.number, self.name = number, name
        self.deadline = time.monotonic() + STEP_TIMEOUT_S
        begun = time.monotonic()
        try:
            yield
        except DemoFailure as failure:
            failure.where = f"step {number} ({name})" if number else name
            raise
        if number is not None:
            self.passed.append(name)
        self.emit({"kind": "step", "step": number, "name": name, "ms": self.ms() - self.ms(begun)})

    # --- traffic ----------------------------------------------------------------------
    def send(self, request_type: str, **fields: Any) -> str:
        request_id = f"demo_{len(self.sent) + 1}"
        message = {**fields, "type": request_type, "requestId": request_id}
        self.sent[request_id] = (request_type, time.monotonic())
        self.emit({**self.base("request"), "requestId": request_id, "message": message})
        try:
            self.host.send(message)
        except OSError as exc:
            raise DemoFailure(f"to send {request_type} to the host", self.host_gone(exc)) from exc
        return request_id

    def exchange(self, request_type: str, *expect: Expectation, **fields: Any) -> Any:
        """Send one request, wait for its response and the expected events; the result."""
        request_id = self.send(request_type, **fields)
        response = Expectation(
            f"the response to {request_type} {request_id}",
            lambda f: f.get("type") == "response" and f.get("requestId") == request_id,
        )
        self.wait_for(response, *expect)
        assert response.frame is not None
        return response.frame.get("result")

    def wait_for(self, *expectations: Expectation) -> None:
        """Read frames until each expectation has its frame, in any order."""
        while pending := [e.what for e in expectations if e.frame is None]:
            expected = " and ".join(pending)
            try:
                frame = self.host.read(max(0.0, self.deadline - time.monotonic()))
            except TimeoutError:
                raise DemoFailure(expected, f"nothing within {STEP_TIMEOUT_S:g} s") from None
            except EOFError as exc:
                raise DemoFailure(expected, self.host_gone(exc)) from None
            except HostProtocolError as exc:
                raise DemoFailure(expected, f"a protocol violation: {exc}") from None
            self.take(frame)
            for expectation in expectations:
                if expectation.frame is None and expectation.match(frame):
                    expectation.frame = frame
                    break

    def take(self, frame: Frame) -> None:
        """Report one frame, then fail on anything a healthy session never shows."""
        kind = frame.get("type")
        if kind == "response":
            self.take_response(frame)
        elif kind == "thread_event":
            self.take_event(frame)
        else:
            self.emit({**self.base("frame"), "frame": frame})
            code = error_of(frame).get("code")
            detail = f" {code}" if code else ""
            raise DemoFailure("only response and thread_event frames", f"a {kind} frame{detail}")

    def take_response(self, frame: Frame) -> None:
        request_id = frame.get("requestId")
        if request_id not in self.sent:
            self.emit({**self.base("frame"), "frame": frame})
            raise DemoFailure("responses to the demo's requests", f"one for {request_id!r}")
        request_type, sent_at = self.sent[request_id]
        rtt_ms = self.ms() - self.ms(sent_at)
        self.emit(
            {**self.base("response"), "requestType": request_type, "rttMs": rtt_ms, "frame": frame}
        )
        if frame.get("ok") is not True:
            error = error_of(frame)
            raise DemoFailure(
                f"an ok response to {request_type} {request_id}",
                f"error {error.get('code')}: {error.get('message')}",
            )

    def take_event(self, frame: Frame) -> None:
        event = event_of(frame)
        self.emit({**self.base("event"), "event": event})
        if event.get("type") == "error":
            error = error_of(event)
            raise DemoFailure(
                "events of a healthy thread",
                f"an error event {error.get('code')}: {error.get('message')}",
            )
        if event.get("threadId") != self.thread_id:
            raise DemoFailure(f"events of thread {self.thread_id}", compact(event))
        seq = event.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            raise DemoFailure(f"a seq above {self.last_seq}", f"seq {seq!r}")
        self.last_seq = seq

    def host_gone(self, exc: BaseException) -> str:
        """What became of a host that stopped reading or writing."""
        try:
            status = self.host.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return f"a closed pipe ({exc.__class__.__name__}) from a running host"
        return f"the host exited with status {status}"

    # --- what a page and its tool do --------------------------------------------------
    def turn_end(self) -> Expectation:
        """The end of a turn: `operation_completed` (current) or `status_changed idle`."""
        if self.current:
            return Expectation("operation_completed", is_event("operation_completed"))
        return Expectation("status_changed idle", is_event("status_changed", status="idle"))

    def check_turn(self, started: Any, end: Expectation) -> None:
        """A current turn must complete the operation that `send_text` started."""
        if self.current:
            operation = started.get("operationId") if isinstance(started, dict) else None
            completed = event_of(end.frame or {})
            require(
                completed.get("operationId") == operation and completed.get("success") is True,
                f"operation {operation} completed successfully",
                completed,
            )

    def run_tool(self, call: dict[str, Any]) -> dict[str, int]:
        """The page's implementation of update_counter."""
        args = call.get("args")
        require(
            isinstance(args, dict) and isinstance(args.get("delta"), int),
            'args {"delta": <integer>}',
            args,
        )
        assert isinstance(args, dict)
        self.counter += args["delta"]
        return {"counter": self.counter}


def run_steps(s: Session) -> None:
    """The eight steps of the session, each checked."""
    page = {"callerOrigin": PAGE_ORIGIN}
    with s.step(1, "ping"):
        pong = s.exchange("ping")
        require(isinstance(pong, dict) and pong.get("connected") is True, "connected", pong)
    with s.step(2, "list_providers"):
        providers = s.exchange("list_providers")
        entries = providers if isinstance(providers, list) else []
        codes = [p.get("code") for p in entries if isinstance(p, dict)]
        require(codes == PROVIDER_CODES, f"6 providers {', '.join(PROVIDER_CODES)}", codes)
    with s.step(3, "get_settings"):
        settings = s.exchange("get_settings")
        require(
            isinstance(settings, dict) and "defaultProvider" in settings,
            "settings with defaultProvider",
            settings,
        )
    with s.step(4, "create_thread"):
        created = s.exchange("create_thread", provider="codex", skills=SKILLS, **page)
        thread_id = created.get("threadId") if isinstance(created, dict) else None
        require(isinstance(thread_id, str) and thread_id != "", "a threadId", created)
        s.thread_id = str(thread_id)
    with s.step(5, "subscribe_thread"):
        subscribed = s.exchange("subscribe_thread", threadId=s.thread_id, **page)
        require(
            isinstance(subscribed, dict) and subscribed.get("subscribed") is True,
            "subscribed",
            subscribed,
        )
        snapshot = subscribed.get("snapshot")
        if s.current:
            require(
                isinstance(snapshot, dict) and snapshot.get("threadId") == s.thread_id,
                f"a snapshot of {s.thread_id}",
                subscribed,
            )
        else:
            require(snapshot is None, "no snapshot from a legacy Core", subscribed)
    with s.step(6, "send_text"):
        reply = Expectation('"echo: hello"', is_event("assistant_message", text="echo: hello"))
        end = s.turn_end()
        turn = s.exchange("send_text", reply, end, threadId=s.thread_id, message="hello", **page)
        s.check_turn(turn, end)
    with s.step(7, "tool_round_trip"):
        call = Expectation(f"tool_call {TOOL_NAME}", is_event("tool_call", toolName=TOOL_NAME))
        turn = s.exchange("send_text", call, threadId=s.thread_id, message=TOOL_MESSAGE, **page)
        tool_call = event_of(call.frame or {})
        result = s.run_tool(tool_call)
        tool_request_id = tool_call.get("requestId")
        done = Expectation(
            f"tool_result {compact(result)}",
            is_event("tool_result", requestId=tool_request_id, result=result),
        )
        text = f"echo: tool {TOOL_NAME} returned {compact(result)}"
        reply = Expectation(json.dumps(text), is_event("assistant_message", text=text))
        end = s.turn_end()
        s.exchange(
            "submit_tool_result",
            done,
            reply,
            end,
            threadId=s.thread_id,
            toolRequestId=tool_request_id,
            result=result,
            **page,
        )
        s.check_turn(turn, end)
    with s.step(8, "end_thread"):
        s.exchange(
            "end_thread", Expectation("ended", is_event("ended")), threadId=s.thread_id, **page
        )


def check_exit(s: Session) -> None:
    """Close stdin like Chrome does on disconnect; the host must exit 0 at once, cleanly."""
    with s.step(None, "exit"):
        s.emit(s.base("close_stdin"))
        closed = time.monotonic()
        s.host.close_stdin()
        try:
            status = s.host.proc.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise DemoFailure(
                f"the host to exit within {EXIT_TIMEOUT_S:g} s of stdin closing", "no exit"
            ) from None
        s.emit({**s.base("exit"), "status": status, "ms": s.ms() - s.ms(closed)})
        require(status == 0, "exit status 0", status)
        while True:
            try:
                s.take(s.host.read(EXIT_TIMEOUT_S))
            except EOFError:
                break
            except TimeoutError:
                raise DemoFailure("stdout closed at exit", "stdout still open") from None
            except HostProtocolError as exc:
                raise DemoFailure("only valid frames", f"a protocol violation: {exc}") from None


def host_command() -> list[str]:
    """The host to run: `$PEDELEC_DEMO_HOST_CMD` if set, else this checkout's."""
    override = os.environ.get(HOST_CMD_ENV)
    return shlex.split(override) if override else default_host_command()


def log_tail(log_dir: str) -> list[str]:
    """The host log's last lines: on failure they usually say why."""
    lines: list[str] = []
    for path in sorted(Path(log_dir).glob("*.log")):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[-LOG_TAIL_LINES:]


def run_demo(generation: str, emit: Emit) -> int:
    """Everything lives in one temporary directory, removed before returning."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pedelec-demo-") as root:
        env = isolated_env(os.environ, root)
        host: HostProcess | None = None
        session: Session | None = None
        try:
            with contextlib.ExitStack() as stack:
                try:
                    home = Path(env["PEDELEC_HOME"])
                    core = stack.enter_context(
                        DevCore(DevCoreSettings(home=home, generation=generation))
                    )
                    with interrupts_held():  # a Ctrl-C now still stops the host
                        host = HostProcess(host_command(), env=env)
                        stack.callback(host.stop, EXIT_TIMEOUT_S)
                except OSError as exc:
                    failure = DemoFailure("the dev Core and the host to start", str(exc))
                    failure.where = "start"
                    raise failure from exc
                emit(
                    {
                        "kind": "start",
                        "tMs": round((time.monotonic() - started) * 1000),
                        "generation": generation,
                        "tempDir": root,
                        "core": core.endpoint,
                        "host": host.command,
                        "hostPid": host.proc.pid,
                        "origin": PAGE_ORIGIN,
                    }
                )
                session = Session(host, emit, started, generation)
                run_steps(session)
                check_exit(session)
        except DemoFailure as failure:
            emit(
                {
                    "kind": "failed",
                    "tMs": round((failure.at - started) * 1000),
                    "where": failure.where,
                    "step": session.number if session else None,
                    "stepName": session.name if session else "start",
                    "expected": failure.expected,
                    "received": failure.received,
                    "hostStderr": host.final_stderr().strip() if host else "",
                    "hostLog": log_tail(env["PEDELEC_NATIVE_HOST_LOG_DIR"]),
                }
            )
            return 1
    total_ms = round((time.monotonic() - started) * 1000)
    emit({"kind": "passed", "steps": len(session.passed), "ms": total_ms})
    return 0
