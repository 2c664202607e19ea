"""Per-thread event channels and live subscription streams (spec 3.8).

A channel owns the thread's `seq` counter; every subscriber gets its own queue and writer
thread, so one slow or held-back stream never delays the others or the emitter.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from native_host.devcore.wire import dumps


class Sink(Protocol):
    """The connection a stream writes to."""

    def send(self, data: bytes) -> bool:
        """Write one line (with its newline); False once the connection is gone."""

    def close_from_core(self) -> None:
        """Close the connection from the Core side."""


@dataclass(frozen=True)
class _Item:
    deliver_at: float
    data: bytes
    is_event: bool


class Subscriber:
    """One subscription connection: queued lines, written in order by a dedicated thread."""

    def __init__(
        self,
        sink: Sink,
        thread_id: str,
        *,
        hold_ms: int | None,
        close_after: int | None,
        gate: threading.Event | None = None,
    ) -> None:
        self.sink = sink
        self.thread_id = thread_id
        self._hold = (hold_ms or 0) / 1000
        self._gate = gate
        """When set, nothing is written before the test opens it (`gate_stream_events`)."""
        self._close_after = close_after
        self._queue: queue.Queue[_Item | None] = queue.Queue()
        self._closed = threading.Event()
        self._written = 0

    def enqueue_event(self, event: dict[str, Any]) -> None:
        """Queue one `thread_event` line."""
        line = dumps({"type": "thread_event", "event": event}) + b"\n"
        self._queue.put(_Item(time.monotonic() + self._hold, line, True))

    def enqueue_raw(self, data: bytes) -> None:
        """Queue raw bytes (a test's garbage or oversize line), in order with the events."""
        self._queue.put(_Item(time.monotonic() + self._hold, data, False))

    def start(self) -> None:
        """Begin writing; called after the subscribe response so nothing precedes it."""
        if self._close_after == 0:
            self.sink.close_from_core()
            return
        threading.Thread(
            target=self._run, name=f"devcore-stream-{self.thread_id}", daemon=True
        ).start()

    def stop(self) -> None:
        """Stop the writer; queued lines are discarded."""
        self._closed.set()
        self._queue.put(None)

    def _run(self) -> None:
        while not self._closed.is_set():
            item = self._queue.get()
            if item is None:
                return
            delay = item.deliver_at - time.monotonic()
            if delay > 0 and self._closed.wait(delay):
                return
            while self._gate is not None and not self._gate.wait(0.5):
                if self._closed.is_set():  # woken to notice a stop
                    return
            if not self.sink.send(item.data):
                return
            if item.is_event:
                self._written += 1
                if self._close_after is not None and self._written >= self._close_after:
                    self.sink.close_from_core()
                    return


class Channel:
    """A thread id's `seq` counter and its live subscribers (kept even for unknown ids)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.lock = threading.RLock()
        self.seq = 0
        self._subscribers: list[Subscriber] = []

    def emit(self, event_type: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Number the event and queue it on every live stream; no replay for later subscribers."""
        with self.lock:
            self.seq += 1
            event = {"type": event_type, **fields, "seq": self.seq, "threadId": self.thread_id}
            for subscriber in self._subscribers:
                subscriber.enqueue_event(event)
            return event

    def next_seq(self) -> int:
        """Consume a seq number for an event written to one stream only (fault events)."""
        with self.lock:
            self.seq += 1
            return self.seq

    def add(self, subscriber: Subscriber) -> None:
        with self.lock:
            self._subscribers.append(subscriber)

    def remove(self, subscriber: Subscriber) -> None:
        with self.lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def subscribers(self) -> list[Subscriber]:
        with self.lock:
            return list(self._subscribers)
