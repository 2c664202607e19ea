"""Thread subscriptions: one Core stream per (threadId, origin) key (spec 1.8, 7.7-7.10, 9.3).

A key is *pending* while its setup runs and *live* once the subscribe response has been
relayed. The stream's generation (legacy or current) is decided by the Core's subscribe
result and fixed for the stream's life: it picks how a broken stream is reported.

This module gets the gateway (Core access) and the outbox (the way to the browser), not
the relay, so it can run, and be tested, on its own against a Core.
"""

from __future__ import annotations

import threading

from native_host import codec, errors, events, logs, messages
from native_host.core.lines import KEEP_BYTES, LineReader, OversizeLine
from native_host.errors import HostError
from native_host.framing import MAX_FRAME_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from native_host.admission import Attempt
    from native_host.core.connection import CoreConnection
    from native_host.gateway import CoreGateway
    from native_host.messages import NativeRequest
    from native_host.outbox import Outbox

log = logs.get(__name__)

MAX_EARLY_EVENTS = 1000
"""Events buffered while the subscribe response is awaited (spec 7.10)."""
DUPLICATE = {"subscribed": True, "duplicate": True}


class Subscription:
    """One stream and the requests waiting on its setup."""

    def __init__(self, key: tuple[str, str | None], thread_id: str) -> None:
        self.key = key
        self.thread_id = thread_id
        self.ready = threading.Event()
        self.live = False
        self.current = False
        self.setup_error: dict[str, Any] | None = None
        self.connection: CoreConnection | None = None
        self.closed_by_host = False
        self.latest_seq: int | None = None
        """The highest snapshot `latestSeq` relayed for this key (spec 9.3, `ended`)."""

    def note_snapshot(self, snapshot: Any) -> None:
        if isinstance(snapshot, dict):
            seq = snapshot.get("latestSeq")
            if isinstance(seq, int) and not isinstance(seq, bool):
                self.latest_seq = seq if self.latest_seq is None else max(self.latest_seq, seq)


class Subscriptions:
    """The subscriptions table of one host process."""

    def __init__(self, gateway: CoreGateway, outbox: Outbox) -> None:
        self.gateway = gateway
        self.outbox = outbox
        self.stopping = gateway.stopping
        self._lock = threading.Lock()
        self._table: dict[tuple[str, str | None], Subscription] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            if self._table.get(sub.key) is sub:
                del self._table[sub.key]

    def _is_live(self, sub: Subscription) -> bool:
        with self._lock:
            return self._table.get(sub.key) is sub and sub.live

    def claim(self, request: NativeRequest, origin: str | None) -> tuple[Subscription, bool]:
        """The request's key: taken now (True: this request sets it up), or the
        subscribe already on it. The relay claims in arrival order, before the request's
        thread runs, so a duplicate never overtakes the subscribe it duplicates.
        HOST_BUSY when a new key would pass the cap."""
        thread_id: str = request.message["threadId"]
        key = (thread_id, origin)
        with self._lock:
            sub = self._table.get(key)
            if sub is not None:
                return sub, False
            limit = self.gateway.config.max_subscriptions
            if len(self._table) >= limit:
                raise errors.host_busy(
                    errors.BUSY_SUBSCRIPTIONS, limit, note=errors.NOTE_SUBSCRIPTIONS_NOT_QUEUED
                )
            sub = self._table[key] = Subscription(key, thread_id)
            return sub, True

    def subscribe(
        self,
        request: NativeRequest,
        origin: str | None,
        attempt: Attempt,
        claimed: tuple[Subscription, bool] | None = None,
    ) -> None:
        """Handle one subscribe_thread request (runs on its own thread), on the key
        `claimed` for it, or on one it claims itself.

        A request that already reached the Core (a duplicate's `thread_snapshot`) is
        never sent again, even when its key died meanwhile (spec 7.5 over 9.3).
        """
        while True:
            self.gateway.refuse_resend(attempt, errors.STAGE_SUBSCRIBE)
            sub, owner = claimed or self.claim(request, origin)
            claimed = None
            if owner:
                self._own_setup(sub, request, origin, attempt)
                return
            sub.ready.wait()
            if sub.setup_error is not None:
                self.outbox.error(request.request_id, request.type, sub.setup_error)
                return
            if self._answer_duplicate(sub, request, origin, attempt):
                return

    def _own_setup(
        self, sub: Subscription, request: NativeRequest, origin: str | None, attempt: Attempt
    ) -> None:
        """Run the setup; if it fails unexpectedly, fail the key too, so that nobody waits
        on it forever and the next subscribe starts afresh."""
        try:
            self._setup(sub, request, origin, attempt)
        except Exception:
            log.exception("subscription setup for %s failed", sub.thread_id)
            if not sub.ready.is_set():
                internal = HostError(
                    errors.IPC_UNAVAILABLE, errors.MSG_INTERNAL, errors.STAGE_SUBSCRIBE
                )
                self._fail_setup(sub, request, internal.to_error())

    # --- duplicates ----------------------------------------------------------------
    def _answer_duplicate(
        self, sub: Subscription, request: NativeRequest, origin: str | None, attempt: Attempt
    ) -> bool:
        """Answer a subscribe on a live key; False if the key is not live any more."""
        if not self._is_live(sub):
            return False
        if not sub.current:
            self.outbox.ok(request.request_id, request.type, DUPLICATE)
            return True
        envelope = messages.core_envelope(request, origin, kind="thread_snapshot")
        response = self.gateway.request(
            attempt,
            envelope,
            self.gateway.config.core_response_timeout_ms,
            errors.STAGE_SUBSCRIBE,
        )
        if not self._is_live(sub):
            return False
        if response["ok"]:
            snapshot = response["result"]
            if not isinstance(snapshot, dict):
                raise HostError(
                    errors.IPC_UNAVAILABLE, errors.MSG_NO_SNAPSHOT, errors.STAGE_SUBSCRIBE
                )
            answer = {**DUPLICATE, "snapshot": snapshot}
            if codec.too_deep(messages.ok_response(request.request_id, answer)):
                raise messages.too_deep_response_error()  # one level deeper than the line
            sub.note_snapshot(snapshot)
            self.outbox.ok(request.request_id, request.type, answer)
            return True
        core_error = response["error"]
        if core_error.get("code") == errors.IPC_UNAVAILABLE and core_error.get("message") == (
            "unknown Core IPC request type"
        ):
            self.outbox.ok(request.request_id, request.type, DUPLICATE)
            return True
        self.outbox.error(request.request_id, request.type, core_error)
        return True

    # --- setup -----------------------------------------------------------------------
    def abandon(self, sub: Subscription, error: dict[str, Any]) -> None:
        """Give up a key whose setup cannot go on: whoever waits on it is answered
        `error`, and the next subscribe on it starts afresh."""
        self._forget(sub, error)
        sub.ready.set()

    def _forget(self, sub: Subscription, error: dict[str, Any]) -> None:
        sub.setup_error = error
        self._remove(sub)
        if sub.connection is not None:
            sub.connection.close()

    def _fail_setup(self, sub: Subscription, request: NativeRequest, error: dict[str, Any]) -> None:
        """Forget the key, answer the request that set it up, then wake those waiting on
        it: a duplicate never overtakes the answer it waited for, and a subscribe sent
        after that answer starts afresh."""
        self._forget(sub, error)
        if not self.stopping.is_set():
            self.outbox.error(request.request_id, request.type, error)
        sub.ready.set()

    def _setup(
        self, sub: Subscription, request: NativeRequest, origin: str | None, attempt: Attempt
    ) -> None:
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
            sub.connection, response = self.gateway.open_stream(
                attempt,
                messages.core_envelope(request, origin),
                self.gateway.config.core_response_timeout_ms,
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
        body = codec.encode(messages.ok_response(request.request_id, result))
        if len(body) > MAX_FRAME_BYTES:
            too_large = messages.oversize_response_error(request.type, len(body))
            self._fail_setup(sub, request, too_large.to_error())
            return
        if self.stopping.is_set() or not self.outbox.send_body(body):
            return
        with self._lock:
            sub.live = True
        sub.ready.set()
        attempt.release()  # an established stream does not count as in flight (spec 9.7)
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
            self._pump(sub, sub.connection)
        except Exception:
            log.exception("stream %s reader failed", sub.thread_id)
            self._broken(sub, "native host stream reader failed")

    # --- the live stream ---------------------------------------------------------------
    def _pump(self, sub: Subscription, connection: CoreConnection) -> None:
        """Forward the stream until it ends; report an unexpected end once.

        Event lines already received together are written together (`_Batch`): never
        held back while the host would wait for more, always in order.
        """
        reader = connection.reader
        batch = _Batch(self.outbox)
        try:
            self._pump_lines(sub, reader, batch)
        finally:
            batch.flush()

    def _pump_lines(self, sub: Subscription, reader: LineReader, batch: _Batch) -> None:
        while True:
            if not reader.has_line() and not batch.flush():
                return
            try:
                line = reader.read_line(skip_oversize=True)
            except OSError as exc:
                self._broken(sub, str(exc) or repr(exc))
                return
            if line is None:
                self._broken(sub, errors.MSG_CONNECTION_CLOSED)
                return
            if isinstance(line, OversizeLine):
                if not batch.flush() or not self._oversize_line(sub, line):
                    return
                continue
            try:
                parsed = codec.decode(line)
            except codec.NestingTooDeepError as exc:
                if not batch.flush() or not self._too_deep_line(sub, line, exc.document):
                    return
                continue
            except codec.InvalidJsonError as exc:
                error = events.stream_error(
                    errors.IPC_UNAVAILABLE, errors.MSG_EVENT_NOT_JSON, error=str(exc)
                )
                if not batch.flush() or not self._stream_failure(sub, error):
                    return
                continue
            if not _is_thread_event(parsed):
                log.info(
                    "skipped a Core stream line that is not a thread_event (%s)", sub.thread_id
                )
                continue
            if self.stopping.is_set():
                return
            if len(parsed) == 2:  # exactly {"type","event"}: the line is the frame (spec 1.8)
                # It is already the native message, valid UTF-8 JSON (the codec just read
                # it) and within 1 MiB (the line reader's limit): nothing is encoded again.
                if not batch.add(line):
                    return
                if parsed["event"].get("type") == "ended" and not batch.flush():
                    return
                if not self._after_event(sub, parsed["event"]):
                    return
            elif not batch.flush() or not self._forward(sub, parsed["event"]):
                return

    def _forward(self, sub: Subscription, event: dict[str, Any]) -> bool:
        """Relay one event under the size rules; False once the stream is closed."""
        if self.stopping.is_set():
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
            if not self.outbox.send_body(fitted.body):
                return False
        elif fitted.dropped:
            log.warning(
                "dropped %s event of %d bytes (%s)", event.get("type"), fitted.size, sub.thread_id
            )
        elif not self._stream_failure(sub, events.oversize_event_error(event, fitted.size)):
            return False
        return self._after_event(sub, event)

    def _after_event(self, sub: Subscription, event: dict[str, Any]) -> bool:
        """`ended` closes the stream (spec 7.10, 9.3): False then."""
        if event.get("type") == "ended" and self._closes_on_ended(sub, event):
            self._close(sub)
            return False
        return True

    @staticmethod
    def _closes_on_ended(sub: Subscription, event: dict[str, Any]) -> bool:
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

    def _too_deep_line(self, sub: Subscription, line: bytes, document: Any) -> bool:
        """A line nested deeper than codec.MAX_DEPTH: treated like an oversize one (spec
        7.8): informational events are dropped, others become an error; the stream goes on.
        Too deep to parse at all, its type is looked for in its ends, as for an oversize one."""
        if document is None:
            found = events.find_event_type(line[:KEEP_BYTES], line[-KEEP_BYTES:])
            document = events.wrap_event({} if found is None else {"type": found})
        if not _is_thread_event(document):
            log.info(
                "skipped a deep Core stream line that is not a thread_event (%s)", sub.thread_id
            )
            return True
        event: dict[str, Any] = document["event"]
        if events.is_informational(event):
            log.warning(
                "skipped %s event nested deeper than %d levels (%s)",
                event.get("type"),
                codec.MAX_DEPTH,
                sub.thread_id,
            )
            return True
        if not self._stream_failure(sub, events.too_deep_event_error(event, codec.MAX_DEPTH)):
            return False
        return self._after_event(sub, event)

    def _stream_failure(self, sub: Subscription, error: dict[str, Any]) -> bool:
        """A bad line or event: legacy streams get a synthetic event and go on; current
        streams are closed with `thread_subscription_closed` (spec 7.9, 9.3)."""
        log.warning("stream %s: %s", sub.thread_id, error["code"])
        if not sub.current:
            return self.outbox.send(events.synthetic_error_event(sub.thread_id, error))
        self._close(sub)
        if not self.stopping.is_set():
            self.outbox.send(events.subscription_closed(sub.thread_id, error))
        return False

    def _broken(self, sub: Subscription, reason: str) -> None:
        """The Core closed or broke the stream; silent if the host closed it itself."""
        if sub.closed_by_host or self.stopping.is_set():
            return
        self._close(sub)
        error = events.stream_error(
            errors.NATIVE_CONNECTION_CLOSED, errors.MSG_SUBSCRIPTION_CLOSED, error=reason
        )
        log.info("stream %s closed by the Core: %s", sub.thread_id, reason)
        if sub.current:
            self.outbox.send(events.subscription_closed(sub.thread_id, error))
        else:
            self.outbox.send(events.synthetic_error_event(sub.thread_id, error))

    def _close(self, sub: Subscription) -> None:
        sub.closed_by_host = True
        self._remove(sub)
        if sub.connection is not None:
            sub.connection.close()


class _Batch:
    """Event frames waiting to be written together, in arrival order."""

    MAX_FRAMES = 256
    """Under the OS's limit of 1,024 buffers per writev (two per frame)."""
    MAX_BYTES = 1_048_576

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.bodies: list[bytes] = []
        self.size = 0

    def add(self, body: bytes) -> bool:
        """Queue a frame; write the batch once it is full. False once the browser is gone."""
        self.bodies.append(body)
        self.size += len(body)
        if len(self.bodies) >= self.MAX_FRAMES or self.size >= self.MAX_BYTES:
            return self.flush()
        return True

    def flush(self) -> bool:
        """Write what is queued. False once the browser is gone."""
        if not self.bodies:
            return True
        bodies, self.bodies, self.size = self.bodies, [], 0
        return self.outbox.send_bodies(bodies)


def _is_thread_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "thread_event"
        and isinstance(value.get("event"), dict)
    )
