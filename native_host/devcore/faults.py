"""Fault injection (spec 9.8 item 9 and the host's failure tests): which faults exist
(`Faults`) and what each one does to a connection (`FaultInjector`).

Every field defaults to "no fault". The JSON form (CLI `--faults`) uses camelCase keys;
Python code uses the snake_case names. Unknown keys are rejected so a typo cannot silently
disable the fault a test relies on. The server keeps the connections; it asks the injector
what to do with each request and each new stream.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from native_host.devcore.envelope import Request
from native_host.devcore.streams import Channel, Subscriber
from native_host.devcore.threads import DevThread
from native_host.devcore.wire import dumps


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class OversizeEvent(_Model):
    """An event line of exactly `size_bytes` bytes, written on every new stream."""

    type: str = "assistant_message"
    size_bytes: int = Field(default=2_000_000, gt=0)


class Faults(_Model):
    """What the dev Core does wrong on purpose."""

    delay_ms: dict[str, int] = Field(default_factory=dict)
    """Sleep this long before answering a request of the given type."""
    hang_types: set[str] = Field(default_factory=set)
    """Read such a request and never answer anything on that connection again."""
    drop_types: set[str] = Field(default_factory=set)
    """Read such a request, then close the connection without answering."""
    exit_on_type: str | None = None
    """Die when such a request arrives: `os._exit(3)` from the CLI, `crash()` in-process."""
    oversize_response: dict[str, int] = Field(default_factory=dict)
    """Answer the type with an `ok:true` line of exactly this many bytes (spec 8 #23, 9.9 C9)."""
    canned_responses: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Answer the type with this object (its `requestId` defaults to the request's)."""
    event_before_subscribe_response: bool = False
    """Write one event line before the subscribe response (the race of spec 3.8)."""
    garbage_line_after_subscribe: str | None = None
    """Write this raw line on every new stream right after the subscribe response."""
    close_stream_after_events: int | None = Field(default=None, ge=0)
    """Close each stream from the Core side after writing this many events on it."""
    thread_snapshot_unknown: bool = False
    """Answer `thread_snapshot` as an unknown request type (spec 9.9 C4 b)."""
    open_workspace_block_ms: int | None = Field(default=None, ge=0)
    """`open_workspace` without `path` answers `{workspace:null}` only after this long."""
    open_workspace_block_until_close: bool = False
    """`open_workspace` without `path` never answers; it waits for the client to close."""
    oversize_event: OversizeEvent | None = None
    """Write an oversize event on every new stream right after the subscribe response."""
    hold_stream_events_ms: int | None = Field(default=None, ge=0)
    """Deliver each stream event this long after it happened, preserving order."""
    response_request_id: str | None = None
    """Answer every request with this requestId instead of echoing the request's."""
    gate_types: set[str] = Field(default_factory=set)
    """Hold such a request, read and recorded, until the test opens the gate
    (`DevCore.open_gate`): "many requests in flight at once" without trusting a delay."""
    gate_stream_events: bool = False
    """Hold every stream event (in order) until the test opens the gate, like `gate_types`."""
    close_on_accept: int = Field(default=0, ge=0)
    """Close this many connections right after accepting them, before reading a byte (a
    Core shutting down or overloaded: the listener is there, the answer never comes)."""
    deep_response: dict[str, int] = Field(default_factory=dict)
    """Answer the type with an `ok:true` line whose containers nest exactly this deep."""


def exact_line(build: Callable[[str], Any], size: int) -> bytes:
    """Serialise `build("x" * k)` with k chosen so the line is exactly `size` bytes (or minimal)."""
    base = len(dumps(build("")))
    return dumps(build("x" * max(0, size - base)))


def oversize_response_line(request_id: str, request_type: str, size: int) -> bytes:
    """An `ok:true` line of exactly `size` bytes shaped like a real result of that type."""

    def build(pad: str) -> dict[str, Any]:
        result: dict[str, Any]
        if request_type == "list_assets":
            asset = {"name": pad, "path": "/big", "sizeBytes": 1, "modifiedAt": 0}
            result = {"assets": [asset]}
        elif request_type in ("workspace_list_files", "workspace_list_folders"):
            result = {"paths": [pad]}
        elif request_type == "workspace_run":
            result = {
                "exitCode": 0,
                "stdout": pad,
                "stderr": "",
                "stdoutTruncated": False,
                "stderrTruncated": False,
            }
        else:
            result = {"padding": pad}
        return {"requestId": request_id, "ok": True, "result": result}

    return exact_line(build, size)


_PAD_FIELD = {
    "assistant_message": "text",
    "assistant_delta": "text",
    "raw_stdout": "text",
    "raw_stderr": "text",
    "tool_result": "result",
    "tool_call": "args",
    "provider_command_started": "prompt",
}


def oversize_event_line(event: dict[str, Any], size: int) -> bytes:
    """A `thread_event` line of exactly `size` bytes around `event`.

    The padded field sorts before `threadId` and `type`, so the event type sits in the
    last few bytes of the line, as with the real Core's sorted serialiser (spec 7.8).
    """
    field = _PAD_FIELD.get(str(event.get("type")), "padding")
    return exact_line(lambda pad: {"type": "thread_event", "event": {**event, field: pad}}, size)


def deep_response_line(request_id: str, depth: int) -> bytes:
    """An `ok:true` line nested `depth` deep: the envelope, then arrays in `result`."""
    result: Any = []
    for _ in range(depth - 2):
        result = [result]
    return dumps({"requestId": request_id, "ok": True, "result": result})


class Wire(Protocol):
    """One accepted connection, as a fault acts on it."""

    hung: bool
    """Set by a hang fault: the server keeps reading and recording, and never answers."""
    streams: list[Subscriber]

    def send(self, data: bytes) -> bool:
        """Write one complete line; False once the connection is gone."""

    def send_json(self, obj: Any) -> bool:
        """Write one object as a line."""

    def close_from_core(self) -> None:
        """Close the connection from the Core side."""


class FaultInjector:
    """What the active faults do to one dev Core's requests and streams.

    The faults are read afresh for every request, so a test can swap `DevCore.faults`
    while the Core runs.
    """

    def __init__(
        self,
        faults: Callable[[], Faults],
        channel: Callable[[str], Channel],
        stop: threading.Event,
        crash: Callable[[], None],
        *,
        current: bool,
        hard_exit: bool,
    ) -> None:
        self._faults = faults
        self._channel = channel
        self._stop = stop
        self._crash = crash
        self._current = current
        self._hard_exit = hard_exit
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self._gated = 0
        self._closed_on_accept = 0

    def close_on_accept(self) -> bool:
        """Whether to close a just-accepted connection unread (`close_on_accept`)."""
        with self._lock:
            if self._closed_on_accept >= self._faults().close_on_accept:
                return False
            self._closed_on_accept += 1
            return True

    @property
    def gated(self) -> int:
        """How many requests wait at the gate now."""
        with self._lock:
            return self._gated

    def open_gate(self) -> None:
        """Let every held request and stream event (and every later one) through."""
        self._gate.set()

    def _wait_at_gate(self) -> bool:
        """Hold until the gate opens; False if the Core stops first."""
        with self._lock:
            self._gated += 1
        try:
            while not self._gate.wait(0.5):  # wakes to notice a stop
                if self._stop.is_set():
                    return False
        finally:
            with self._lock:
                self._gated -= 1
        return not self._stop.is_set()

    def stamp(self, request_id: str) -> str:
        """The requestId a reply carries: the echo, unless `response_request_id` overrides it."""
        stamped = self._faults().response_request_id
        return request_id if stamped is None else stamped

    def intercept(self, wire: Wire, request: Request) -> bool | None:
        """Apply the faults that take a request before the engine sees it.

        None when no fault took it (the engine answers it); otherwise whether the
        connection may still be read.
        """
        faults = self._faults()
        kind = request.type
        if kind == faults.exit_on_type:
            if self._hard_exit:
                os._exit(3)
            self._crash()
            return False
        if kind in faults.drop_types:
            wire.close_from_core()
            return False
        if kind in faults.hang_types:
            wire.hung = True
            return True
        delay = faults.delay_ms.get(kind)
        if delay and self._stop.wait(delay / 1000):
            return False
        if kind in faults.gate_types and not self._wait_at_gate():
            return False
        if kind in faults.deep_response:
            rid = self.stamp(request.request_id)
            wire.send(deep_response_line(rid, faults.deep_response[kind]) + b"\n")
            return True
        if kind in faults.canned_responses:
            self._canned(wire, request, faults.canned_responses[kind])
            return True
        if kind in faults.oversize_response:
            size = faults.oversize_response[kind]
            rid = self.stamp(request.request_id)
            wire.send(oversize_response_line(rid, kind, size) + b"\n")
            return True
        if kind == "open_workspace" and self._picker_blocks(wire, request):
            return not self._stop.is_set()
        return None

    def _picker_blocks(self, wire: Wire, request: Request) -> bool:
        """Faults for the folder picker of `open_workspace` without `path` (spec 9.9 C8)."""
        faults = self._faults()
        payload = request.payload if isinstance(request.payload, dict) else {}
        if not self._current or payload.get("path") is not None:
            return False
        if request.caller_origin is None:
            return False
        if faults.open_workspace_block_until_close:
            wire.hung = True
            return True
        if faults.open_workspace_block_ms is not None:
            self._stop.wait(faults.open_workspace_block_ms / 1000)
        return False

    def _canned(self, wire: Wire, request: Request, canned: dict[str, Any]) -> None:
        """Answer with the canned object; an `ok` subscribe also opens a stream, for any id."""
        answer = dict(canned)
        if "requestId" not in answer:
            answer["requestId"] = self.stamp(request.request_id)
        payload = request.payload if isinstance(request.payload, dict) else {}
        thread_id = payload.get("threadId")
        if (
            request.type == "subscribe_thread"
            and answer.get("ok") is True
            and isinstance(thread_id, str)
        ):
            subscriber = self.open_stream(wire, thread_id)
            self._channel(thread_id).add(subscriber)
            wire.send_json(answer)
            self.start_stream(wire, subscriber)
            return
        wire.send_json(answer)

    def open_stream(self, wire: Wire, thread_id: str) -> Subscriber:
        """A new stream on the connection, holding back or closing as the faults say."""
        faults = self._faults()
        subscriber = Subscriber(
            wire,
            thread_id,
            hold_ms=faults.hold_stream_events_ms,
            close_after=faults.close_stream_after_events,
            gate=self._gate if faults.gate_stream_events else None,
        )
        wire.streams.append(subscriber)
        return subscriber

    def early_event(self, thread: DevThread) -> dict[str, Any] | None:
        """The event to write before the subscribe response, if that fault is on (spec 3.8).

        Called under the thread's lock, before the new stream joins its channel.
        """
        if not self._faults().event_before_subscribe_response:
            return None
        if thread.current:
            return thread.emit("status_changed", status=thread.status)
        return thread.emit("raw_stdout", text="event before subscribe response")

    def start_stream(self, wire: Wire, subscriber: Subscriber) -> None:
        """Right after the subscribe response: the faulty lines a new stream gets, then its
        events."""
        faults = self._faults()
        if faults.garbage_line_after_subscribe is not None:
            wire.send(faults.garbage_line_after_subscribe.encode() + b"\n")
        if faults.oversize_event is not None:
            channel = self._channel(subscriber.thread_id)
            event = {
                "type": faults.oversize_event.type,
                "seq": channel.next_seq(),
                "threadId": subscriber.thread_id,
            }
            wire.send(oversize_event_line(event, faults.oversize_event.size_bytes) + b"\n")
        subscriber.start()
