"""Thread subscriptions: one Core stream per (threadId, origin) key (spec 1.8, 7.7-7.10, 9.3).

A key is *pending* while its setup runs and *live* once the subscribe response has been
relayed. The stream's generation (legacy or current) is decided by the Core's subscribe
result and fixed for the stream's life: it picks how a broken stream is reported.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from native_host import errors, events, messages
from native_host.core.client import close_socket, parse_json, read_response
from native_host.core.lines import LineReader, OversizeLine
from native_host.errors import HostError
from native_host.framing import MAX_FRAME_BYTES, encode_message
from native_host.messages import NativeRequest

if TYPE_CHECKING:
    import socket

    from native_host.relay import Relay

log = logging.getLogger(__name__)

MAX_EARLY_EVENTS = 1000
"""Events buffered while the subscribe response is awaited (spec 7.10)."""

Key = tuple[str, str | None]


@dataclass(eq=False)
class Subscription:
    """One stream and the requests waiting on its setup."""

    key: Key
    thread_id: str
    ready: threading.Event = field(default_factory=threading.Event)
    live: bool = False
    current: bool = False
    setup_error: dict[str, Any] | None = None
    sock: socket.socket | None = None
    closed_by_host: bool = False
    latest_seq: int | None = None
    """The highest snapshot `latestSeq` relayed for this key (spec 9.3, `ended`)."""

    def note_snapshot(self, snapshot: Any) -> None:
        if isinstance(snapshot, dict):
            seq = snapshot.get("latestSeq")
            if isinstance(seq, int) and not isinstance(seq, bool):
                self.latest_seq = seq if self.latest_seq is None else max(self.latest_seq, seq)


class Subscriptions:
    """The subscriptions table of one host process."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self._lock = threading.Lock()
        self._table: dict[Key, Subscription] = {}

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            if self._table.get(sub.key) is sub:
                del self._table[sub.key]

    def _is_live(self, sub: Subscription) -> bool:
        with self._lock:
            return self._table.get(sub.key) is sub and sub.live

    def subscribe(self, request: NativeRequest, origin: str | None) -> None:
        """Handle one subscribe_thread request (runs on its own thread)."""
        thread_id: str = request.message["threadId"]
        key: Key = (thread_id, origin)
        while True:
            with self._lock:
                sub = self._table.get(key)
                owner = sub is None
                if sub is None:
                    sub = Subscription(key=key, thread_id=thread_id)
                    self._table[key] = sub
            if owner:
                self._own_setup(sub, request, origin)
                return
            sub.ready.wait()
            if sub.setup_error is not None:
                self.relay.outbox.respond(
                    request.request_id,
                    request.type,
                    messages.error_response(request.request_id, sub.setup_error),
                )
                return
            if self._answer_duplicate(sub, request, origin):
                return

    def _own_setup(self, sub: Subscription, request: NativeRequest, origin: str | None) -> None:
        """Run the setup; if it fails unexpectedly, fail the key too, so that nobody waits
        on it forever and the next subscribe starts afresh."""
        try:
            self._setup(sub, request, origin)
        except Exception:
            log.exception("subscription setup for %s failed", sub.thread_id)
            if not sub.ready.is_set():
                internal = HostError(
                    errors.IPC_UNAVAILABLE, errors.MSG_INTERNAL, errors.STAGE_SUBSCRIBE
                )
                self._fail_setup(sub, request, internal.to_error())

    # --- duplicates ----------------------------------------------------------------
    def _answer_duplicate(
        self, sub: Subscription, request: NativeRequest, origin: str | None
    ) -> bool:
        """Answer a subscribe on a live key; False if the key died meanwhile (then retry)."""
        local = {"subscribed": True, "duplicate": True}
        if not self._is_live(sub):
            return False
        if not sub.current:
            self._respond_ok(request, local)
            return True
        envelope = messages.core_envelope(request, origin, kind="thread_snapshot")
        try:
            response = self.relay.call_core(
                envelope, self.relay.config.core_response_timeout_ms, errors.STAGE_SUBSCRIBE
            )
        except HostError as error:
            raise _as_subscribe_error(error) from None
        if not self._is_live(sub):
            return False
        if response["ok"]:
            snapshot = response["result"]
            if not isinstance(snapshot, dict):
                raise HostError(
                    errors.IPC_UNAVAILABLE, errors.MSG_NO_SNAPSHOT, errors.STAGE_SUBSCRIBE
                )
            sub.note_snapshot(snapshot)
            self._respond_ok(request, {**local, "snapshot": snapshot})
            return True
        core_error = response["error"]
        if core_error.get("code") == errors.IPC_UNAVAILABLE and core_error.get("message") == (
            "unknown Core IPC request type"
        ):
            self._respond_ok(request, local)
            return True
        self.relay.outbox.respond(
            request.request_id,
            request.type,
            messages.error_response(request.request_id, core_error),
        )
        return True

    def _respond_ok(self, request: NativeRequest, result: dict[str, Any]) -> None:
        self.relay.outbox.respond(
            request.request_id, request.type, messages.ok_response(request.request_id, result)
        )

    # --- setup -----------------------------------------------------------------------
    def _fail_setup(self, sub: Subscription, request: NativeRequest, error: dict[str, Any]) -> None:
        sub.setup_error = error
        self._remove(sub)
        sub.ready.set()
        if sub.sock is not None:
            self.relay.registry.discard(sub.sock)
        if not self.relay.stopping.is_set():
            self.relay.outbox.respond(
                request.request_id, request.type, messages.error_response(request.request_id, error)
            )

    def _setup(self, sub: Subscription, request: NativeRequest, origin: str | None) -> None:
        relay = self.relay
        early: list[dict[str, Any]] = []

        def buffer_event(line: Any) -> bool:
            if not _is_thread_event(line):
                return False
            if len(early) >= MAX_EARLY_EVENTS:
                raise HostError(
                    errors.IPC_UNAVAILABLE,
                    errors.MSG_SUBSCRIBE_NOT_JSON,
                    errors.STAGE_SUBSCRIBE,
                    error="too many events before subscribe response",
                )
            early.append(line["event"])
            return True

        try:
            envelope = messages.core_envelope(request, origin)
            line = relay.core_line(envelope)
            sub.sock = relay.open_core()
            sub.sock.settimeout(relay.config.core_response_timeout_ms / 1000)
            try:
                sub.sock.sendall(line + b"\n")
            except OSError as exc:
                raise HostError(
                    errors.CORE_RUNTIME_UNAVAILABLE,
                    errors.MSG_APP_NOT_RUNNING,
                    errors.STAGE_SUBSCRIBE,
                    error=str(exc),
                ) from None

            timeout_ms = relay.config.core_response_timeout_ms
            reader = LineReader(sub.sock)
            response = read_response(
                reader,
                time.monotonic() + timeout_ms / 1000,
                timeout_ms,
                errors.STAGE_SUBSCRIBE,
                buffer_event,
            )
        except HostError as error:
            self._fail_setup(sub, request, error.to_error())
            return
        if not response["ok"]:
            self._fail_setup(sub, request, response["error"])
            return
        result = response["result"]
        sub.current = isinstance(result, dict) and isinstance(result.get("snapshot"), dict)
        if sub.current:
            sub.note_snapshot(result["snapshot"])
        body = encode_message(messages.ok_response(request.request_id, result))
        if len(body) > MAX_FRAME_BYTES:
            too_large = messages.oversize_response_error(request.type, len(body))
            self._fail_setup(sub, request, too_large.to_error())
            return
        if relay.stopping.is_set() or not relay.outbox.send_body(body):
            return
        with self._lock:
            sub.live = True
        sub.ready.set()
        log.info(
            "subscribed %s (%s stream, %d early events)",
            sub.thread_id,
            "current" if sub.current else "legacy",
            len(early),
        )
        try:
            for event in early:
                if not self._forward(sub, event):
                    return
            self._pump(sub, reader)
        except Exception:
            log.exception("stream %s reader failed", sub.thread_id)
            self._broken(sub, "native host stream reader failed")

    # --- the live stream ---------------------------------------------------------------
    def _pump(self, sub: Subscription, reader: LineReader) -> None:
        """Forward the stream until it ends; report an unexpected end once."""
        assert sub.sock is not None
        sub.sock.settimeout(None)
        while True:
            try:
                line = reader.read_line(skip_oversize=True)
            except OSError as exc:
                self._broken(sub, str(exc) or repr(exc))
                return
            if line is None:
                self._broken(sub, errors.MSG_CONNECTION_CLOSED)
                return
            if isinstance(line, OversizeLine):
                if not self._oversize_line(sub, line):
                    return
                continue
            try:
                parsed = parse_json(line)
            except (ValueError, UnicodeDecodeError) as exc:
                error = events.stream_error(
                    errors.IPC_UNAVAILABLE, errors.MSG_EVENT_NOT_JSON, error=str(exc)
                )
                if not self._stream_failure(sub, error):
                    return
                continue
            if not _is_thread_event(parsed):
                log.info(
                    "skipped a Core stream line that is not a thread_event (%s)", sub.thread_id
                )
                continue
            if not self._forward(sub, parsed["event"]):
                return

    def _forward(self, sub: Subscription, event: dict[str, Any]) -> bool:
        """Relay one event under the size rules; False once the stream is closed."""
        if self.relay.stopping.is_set():
            return False
        fitted = events.fit_event(event)
        if fitted.body is not None:
            if fitted.truncated:
                log.info(
                    "truncated %s event of %d bytes (%s)",
                    event.get("type"),
                    fitted.size,
                    sub.thread_id,
                )
            if not self.relay.outbox.send_body(fitted.body):
                return False
        elif fitted.dropped:
            log.warning(
                "dropped %s event of %d bytes (%s)", event.get("type"), fitted.size, sub.thread_id
            )
        elif not self._stream_failure(sub, events.oversize_event_error(event, fitted.size)):
            return False
        if event.get("type") == "ended" and self._closes_on_ended(sub, event):
            self._close(sub)
            return False
        return True

    def _closes_on_ended(self, sub: Subscription, event: dict[str, Any]) -> bool:
        """`ended` closes the stream, except a late one on a current stream (spec 9.3)."""
        if not sub.current or sub.latest_seq is None:
            return True
        seq = event.get("seq")
        return not (isinstance(seq, int) and seq <= sub.latest_seq)

    def _oversize_line(self, sub: Subscription, line: OversizeLine) -> bool:
        event_type = events.find_event_type(line.head, line.tail)
        if event_type in events.INFORMATIONAL_TYPES:
            log.warning(
                "skipped oversize %s line of %d bytes (%s)", event_type, line.size, sub.thread_id
            )
            return True
        return self._stream_failure(sub, events.oversize_line_error(line.size, event_type))

    def _stream_failure(self, sub: Subscription, error: dict[str, Any]) -> bool:
        """A bad line or event: legacy streams get a synthetic event and go on; current
        streams are closed with `thread_subscription_closed` (spec 7.9, 9.3)."""
        log.warning("stream %s: %s", sub.thread_id, error["code"])
        if not sub.current:
            return self.relay.outbox.send(events.synthetic_error_event(sub.thread_id, error))
        self._close(sub)
        if not self.relay.stopping.is_set():
            self.relay.outbox.send(events.subscription_closed(sub.thread_id, error))
        return False

    def _broken(self, sub: Subscription, reason: str) -> None:
        """The Core closed or broke the stream; silent if the host closed it itself."""
        if sub.closed_by_host or self.relay.stopping.is_set():
            return
        self._close(sub)
        error = events.stream_error(
            errors.NATIVE_CONNECTION_CLOSED, errors.MSG_SUBSCRIPTION_CLOSED, error=reason
        )
        log.info("stream %s closed by the Core: %s", sub.thread_id, reason)
        if sub.current:
            self.relay.outbox.send(events.subscription_closed(sub.thread_id, error))
        else:
            self.relay.outbox.send(events.synthetic_error_event(sub.thread_id, error))

    def _close(self, sub: Subscription) -> None:
        sub.closed_by_host = True
        self._remove(sub)
        if sub.sock is not None:
            self.relay.registry.discard(sub.sock)
            close_socket(sub.sock)


def _is_thread_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "thread_event"
        and isinstance(value.get("event"), dict)
    )


def _as_subscribe_error(error: HostError) -> HostError:
    """Host errors of a duplicate's `thread_snapshot` carry stage `subscribe` (spec 9.3),
    except the discovery/launch stages, which say where the Core was not found."""
    keep = {
        errors.STAGE_DISCOVER_CORE,
        errors.STAGE_CONNECT_CORE,
        errors.STAGE_LAUNCH_DESKTOP,
        errors.STAGE_READ_LAUNCH_CONFIG,
        errors.STAGE_SPAWN_DESKTOP_APP,
        errors.STAGE_WAIT_FOR_CORE_RUNTIME,
    }
    return error if error.stage in keep else error.restaged(errors.STAGE_SUBSCRIBE)
