"""The one place the host talks to the Core (docs/architecture.md).

The gateway finds the Core through `runtime.json`, checks who is listening before a
byte is written, starts Pedelec Desktop once when the Core is down, writes request
lines and reads responses or keeps a stream open. The relay, the subscriptions, the
launcher's readiness probe and `doctor` all come through here, so each rule holds
everywhere at once:

- retry only before the first byte (spec 7.5): `_open` is the only code that may launch
  and re-attempt, and it runs before anything is sent; an `Attempt` that was written
  once is never written again, whoever asks;
- admission (docs/security.md): requests running, requests without a timeout and the
  bytes they hold are capped here; beyond the caps requests wait in a bounded queue,
  fair across origins, and only a full queue is answered at once;
- the size rule of Core requests (spec 7.6) and the response timeout (spec 7.3), which
  counts from the request's admission, so time spent queued counts too.
"""

from __future__ import annotations

import _thread
import collections
import os
import time

from native_host import codec, errors, logs
from native_host.core import peer
from native_host.core.connection import (
    ConnectionRegistry,
    CoreConnection,
    connect_socket,
    is_resource_error,
)
from native_host.core.discovery import CoreEndpoint, CoreUnreachableError, read_runtime
from native_host.core.lines import MAX_LINE_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping
    from typing import Any

    from native_host.config import HostConfig
    from native_host.launch.launcher import Launcher

log = logs.get(__name__)

_MIN_PROBE_S = 0.05
"""Floor of a probe's budget so the last probe before a deadline can still succeed."""
MSG_ALREADY_SENT = "the request already reached the Core once and is never sent again"


class _ClosedBeforeFirstByteError(Exception):
    """The Core's end of a new connection closed before the host wrote to it."""


class Attempt:
    """One native request's claim on the Core: admitted under the caps, written at most
    once (spec 7.5). `release` gives its place back; calling it twice is harmless.
    `admitted` is when the page's request was admitted: its timeouts count from there."""

    __slots__ = ("_release", "admitted", "written")

    def __init__(
        self, release: Callable[[], None] | None = None, admitted: float | None = None
    ) -> None:
        self.written = False
        self.admitted = time.monotonic() if admitted is None else admitted
        self._release = release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class Ticket:
    """A native request asking for a running place: what it holds, its response timeout
    (None: it waits without one, a folder picker), whether the host answers it itself
    (`local`), what to run once it has a place (`start`, given its Attempt) and how to
    answer it if its deadline passes while it still waits in the queue (`expire`)."""

    __slots__ = (
        "admitted",
        "attempt",
        "deadline",
        "expire",
        "local",
        "origin",
        "queued",
        "size",
        "stage",
        "start",
        "timeout_ms",
    )

    def __init__(
        self,
        size: int,
        origin: str | None,
        timeout_ms: int | None,
        stage: str,
        start: Callable[[Attempt], object],
        expire: Callable[[errors.HostError], object],
        local: bool = False,
    ) -> None:
        self.size = size
        self.local = local
        self.origin = origin
        self.timeout_ms = timeout_ms
        self.stage = stage
        self.start: Callable[[Attempt], object] | None = start
        self.expire: Callable[[errors.HostError], object] | None = expire
        self.admitted = time.monotonic()
        self.attempt = Attempt(admitted=self.admitted)
        self.deadline = None if timeout_ms is None else self.admitted + timeout_ms / 1000
        self.queued = False

    @property
    def untimed(self) -> bool:
        return self.timeout_ms is None


class _Lane:
    """One kind of request (timed, untimed or host-local): how many run, at most `limit`, and the
    queue behind them, one FIFO per origin, origins served round-robin."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self.waiting: collections.OrderedDict[str | None, collections.deque[Ticket]]
        self.waiting = collections.OrderedDict()
        self.last_served: tuple[str | None] | None = None

    def push(self, ticket: Ticket) -> None:
        """Queue a ticket; an origin not yet waiting goes before the origin served last,
        so it gets the next place that frees."""
        queue = self.waiting.get(ticket.origin)
        if queue is None:
            queue = self.waiting[ticket.origin] = collections.deque()
            if self.last_served is not None and self.last_served[0] in self.waiting:
                self.waiting.move_to_end(self.last_served[0])
        queue.append(ticket)

    def head(self) -> Ticket | None:
        for queue in self.waiting.values():
            return queue[0]
        return None

    def pop(self) -> Ticket:
        """The next ticket to run: the head of the origin first in turn."""
        origin, queue = next(iter(self.waiting.items()))
        ticket = queue.popleft()
        if queue:
            self.waiting.move_to_end(origin)
        else:
            del self.waiting[origin]
        self.last_served = (origin,)
        return ticket

    def remove(self, ticket: Ticket) -> None:
        queue = self.waiting[ticket.origin]
        queue.remove(ticket)
        if not queue:
            del self.waiting[ticket.origin]


LOCAL_PLACES = 4
"""Host-local requests running at once: answered from the host's own files, they need
few places, but never one a slow Core request holds."""


class Admission:
    """What one host runs at once, and the bounded queue behind it (docs/security.md).

    At most `max_requests` timed and `max_untimed` untimed requests run (each holds a
    thread and a Core connection), holding at most `max_bytes` frame bytes; host-local
    requests (a ping, the origin policy) have `LOCAL_PLACES` of their own, so they never
    wait behind slow Core requests. A request that finds no place waits in a queue that
    holds no thread: at most `max_queued` requests and `max_queued_bytes` bytes, of which
    one origin holds at most half. A freed place goes to the next origin in turn
    (round-robin, FIFO within an origin), so a page waiting behind another page's flood
    starts at the next place that frees. Only a full queue is refused (HOST_BUSY,
    `details.reason` names the bound); a request whose deadline passes while it waits is
    answered with its timeout error.
    """

    def __init__(
        self,
        max_requests: int,
        max_untimed: int,
        max_bytes: int,
        max_queued: int,
        max_queued_bytes: int,
        stopping: Stopping | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes
        self.origin_max_queued = (max_queued + 1) // 2
        self.origin_max_queued_bytes = (max_queued_bytes + 1) // 2
        self.stopping = stopping or Stopping()
        self._lock = _thread.allocate_lock()
        self._changed: threading.Condition | None = None
        """Wakes the deadline thread; made with it, when something first queues."""
        self._timed = _Lane(max_requests)
        self._untimed = _Lane(max_untimed)
        self._local = _Lane(LOCAL_PLACES)
        self.bytes = 0
        self.queued = 0
        self.queued_bytes = 0
        self._by_origin: dict[str | None, tuple[int, int]] = {}
        self._deadlines: list[tuple[float, int, Ticket]] = []
        self._serial = 0
        self._watching = False
        self._dispatching = False

    def admit(self, ticket: Ticket) -> None:
        """Start the ticket now if a place is free, else queue it; HostError(HOST_BUSY)
        if the queue has no room for it (nothing is kept then)."""
        with self._lock:
            lane = self._lane(ticket)
            if not lane.waiting and lane.running < lane.limit and self._fits(ticket):
                self._take(lane, ticket)
                ready = True
            else:
                self._check_room(ticket)
                self._queue(lane, ticket)
                ready = False
        if ready:
            self._launch(ticket)

    # --- under the lock ---------------------------------------------------------------
    def _lane(self, ticket: Ticket) -> _Lane:
        if ticket.local:
            return self._local
        return self._untimed if ticket.untimed else self._timed

    def _fits(self, ticket: Ticket) -> bool:
        """Room in the running bytes (host-local frames, at most 1 MiB each, hold none)."""
        return ticket.local or not self.bytes or self.bytes + ticket.size <= self.max_bytes

    def _take(self, lane: _Lane, ticket: Ticket) -> None:
        held = 0 if ticket.local else ticket.size
        lane.running += 1
        self.bytes += held

        def release() -> None:
            with self._lock:
                lane.running -= 1
                self.bytes -= held
            self._dispatch()

        ticket.attempt = Attempt(release, ticket.admitted)

    def _check_room(self, ticket: Ticket) -> None:
        size = ticket.size
        if self.queued >= self.max_queued:
            raise errors.host_busy(errors.BUSY_QUEUED_REQUESTS, self.max_queued)
        if self.queued_bytes + size > self.max_queued_bytes:
            raise errors.host_busy(errors.BUSY_QUEUED_BYTES, self.max_queued_bytes)
        count, held = self._by_origin.get(ticket.origin, (0, 0))
        if count >= self.origin_max_queued:
            raise errors.host_busy(errors.BUSY_ORIGIN_QUEUED_REQUESTS, self.origin_max_queued)
        if held + size > self.origin_max_queued_bytes:
            raise errors.host_busy(errors.BUSY_ORIGIN_QUEUED_BYTES, self.origin_max_queued_bytes)

    def _queue(self, lane: _Lane, ticket: Ticket) -> None:
        import heapq  # only a queue needs it, never a ping

        if ticket.deadline is not None:
            self._watch()
            self._serial += 1
            entry = (ticket.deadline, self._serial, ticket)
            if len(self._deadlines) > 2 * self.queued + 1024:  # drop the started ones
                self._deadlines = [e for e in self._deadlines if e[2].queued]
                heapq.heapify(self._deadlines)
            heapq.heappush(self._deadlines, entry)
            if self._deadlines[0] is entry and self._changed is not None:
                self._changed.notify()
        lane.push(ticket)
        ticket.queued = True
        self._count(ticket, 1)

    def _count(self, ticket: Ticket, sign: int) -> None:
        self.queued += sign
        self.queued_bytes += sign * ticket.size
        count, held = self._by_origin.get(ticket.origin, (0, 0))
        count, held = count + sign, held + sign * ticket.size
        if count:
            self._by_origin[ticket.origin] = (count, held)
        else:
            del self._by_origin[ticket.origin]

    def _unqueue(self, ticket: Ticket) -> None:
        ticket.queued = False
        self._count(ticket, -1)

    def _take_ready(self) -> list[Ticket]:
        """Tickets that get a place now, in turn; a head that does not fit the bytes
        left waits (nothing overtakes it in its lane)."""
        ready: list[Ticket] = []
        if self.stopping.is_set():
            return ready
        for lane in (self._local, self._timed, self._untimed):
            while lane.running < lane.limit:
                head = lane.head()
                if head is None or not self._fits(head):
                    break
                lane.pop()
                self._unqueue(head)
                self._take(lane, head)
                ready.append(head)
        return ready

    # --- outside the lock ---------------------------------------------------------------
    def _launch(self, ticket: Ticket) -> None:
        start, ticket.start, ticket.expire = ticket.start, None, None
        if start is not None:
            start(ticket.attempt)

    def _dispatch(self) -> None:
        """Start what the freed places allow. One thread at a time does it, and it looks
        again after each round, so a place freed meanwhile is never missed and a start
        that fails (and so frees its place) does not recurse."""
        while True:
            with self._lock:
                if self._dispatching:
                    return
                ready = self._take_ready()
                if not ready:
                    return
                self._dispatching = True
            try:
                for ticket in ready:
                    self._launch(ticket)
            finally:
                with self._lock:
                    self._dispatching = False

    def _watch(self) -> None:
        """Start the one thread that answers queued requests whose deadline passed
        (under the lock, on the first queued request with a deadline)."""
        if self._watching:
            return
        import threading  # only a queue needs it, never a ping (docs/performance.md)

        self._changed = threading.Condition(self._lock)
        logs.hook_threads()
        try:
            threading.Thread(target=self._expire_late, name="queue-deadlines", daemon=True).start()
        except RuntimeError as exc:
            raise errors.resources_exhausted(errors.STAGE_ADMIT_REQUEST, str(exc)) from None
        self._watching = True

    def _expire_late(self) -> None:
        import heapq

        while not self.stopping.is_set():
            late: list[Ticket] = []
            with self._lock:
                now = time.monotonic()
                while self._deadlines and (
                    not self._deadlines[0][2].queued or self._deadlines[0][0] <= now
                ):
                    ticket = heapq.heappop(self._deadlines)[2]
                    if ticket.queued:
                        self._lane(ticket).remove(ticket)
                        self._unqueue(ticket)
                        late.append(ticket)
                if not late and self._changed is not None:
                    wait = self._deadlines[0][0] - now if self._deadlines else None
                    self._changed.wait(wait)
            for ticket in late:
                expire, ticket.start, ticket.expire = ticket.expire, None, None
                if expire is not None and not self.stopping.is_set():
                    expire(errors.response_timed_out(ticket.stage, ticket.timeout_ms, queued=True))


class Stopping:
    """Set once, when the host shuts down; read by every request and stream. Only `set`
    and `is_set` of a `threading.Event`, without importing `threading` (a relay start's
    requests run on `_thread` threads, docs/performance.md)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


def _stages(stage: str | None) -> tuple[str, str]:
    """(write stage, read stage): a subscribe or a probe reports both at its own stage."""
    if stage is None:
        return errors.STAGE_SEND_REQUEST, errors.STAGE_AWAIT_CORE_RESPONSE
    return stage, stage


class CoreGateway:
    """Core access for one host process (or one `doctor` run)."""

    def __init__(
        self,
        config: HostConfig,
        env: Mapping[str, str],
        stopping: Stopping | None = None,
    ) -> None:
        self.config = config
        self.env = env
        self.stopping = stopping or Stopping()
        self.registry = ConnectionRegistry()
        self.admission = Admission(
            config.max_in_flight_requests,
            config.max_untimed_requests,
            config.max_in_flight_bytes,
            config.max_queued_requests,
            config.max_queued_bytes,
            self.stopping,
        )
        self._launcher: Launcher | None = None
        self._launcher_lock = _thread.allocate_lock()

    @property
    def launcher(self) -> Launcher:
        """Built on first need: a host whose Core is up never loads the launch code."""
        with self._launcher_lock:
            if self._launcher is None:
                from native_host.launch.launcher import Launcher

                self._launcher = Launcher(self.config, self.env, self.probe, self.stopping.is_set)
            return self._launcher

    # --- what callers use ------------------------------------------------------------
    def admit(self, ticket: Ticket) -> None:
        self.admission.admit(ticket)

    @staticmethod
    def encode_request(envelope: dict[str, Any], stage: str = errors.STAGE_SEND_REQUEST) -> bytes:
        """A Core request line (no newline), refused over 1 MiB before any discovery
        (spec 7.6): no connection is opened and no launch happens."""
        line = codec.encode(envelope)
        if len(line) > MAX_LINE_BYTES:
            raise errors.HostError(
                errors.MESSAGE_TOO_LARGE, errors.MSG_REQUEST_TOO_LARGE, stage, sizeBytes=len(line)
            )
        return line

    @staticmethod
    def refuse_resend(attempt: Attempt, stage: str | None) -> None:
        """The rule of spec 7.5 in one place: a request written once is never written
        again, whatever happened since (a broken stream, a restarted Core)."""
        if attempt.written:
            raise errors.HostError(
                errors.CORE_RUNTIME_UNAVAILABLE,
                errors.MSG_APP_NOT_RUNNING,
                _stages(stage)[0],
                error=MSG_ALREADY_SENT,
            )

    def request(
        self,
        attempt: Attempt,
        envelope: dict[str, Any],
        timeout_ms: int | None,
        stage: str | None = None,
    ) -> dict[str, Any]:
        """One request on its own connection; the validated response (spec 3.3, 7.2)."""
        line = self.encode_request(envelope, _stages(stage)[0])
        connection = self._open(attempt, stage)
        try:
            started = time.monotonic()
            response = self._exchange(connection, attempt, line, timeout_ms, stage)
        finally:
            connection.close()
        log.info(
            "core answered %s %s ok=%s in %.0f ms",
            envelope["requestId"],
            envelope["type"],
            response["ok"],
            (time.monotonic() - started) * 1000,
        )
        if response["requestId"] != envelope["requestId"]:
            log.debug("core answered %s as %r", envelope["requestId"], response["requestId"])
        return response

    def open_stream(
        self,
        attempt: Attempt,
        envelope: dict[str, Any],
        timeout_ms: int,
        on_other_line: Callable[[Any], bool],
    ) -> tuple[CoreConnection, dict[str, Any]]:
        """Write a subscribe and read its response, keeping the connection for the
        stream's events. Lines before the response go to `on_other_line` (spec 7.10).
        The caller owns the connection from here (and closes it)."""
        line = self.encode_request(envelope)
        connection = self._open(attempt, errors.STAGE_SUBSCRIBE)
        try:
            response = self._exchange(
                connection, attempt, line, timeout_ms, errors.STAGE_SUBSCRIBE, on_other_line
            )
        except BaseException:
            connection.close()
            raise
        return connection, response

    def ping(self, timeout_s: float) -> tuple[CoreEndpoint, dict[str, Any]]:
        """Ping the Core now without launching anything: its endpoint and ping result.

        What readiness probes and `doctor` use, so both see what requests see.
        Raises CoreUnreachableError (down or refused) or HostError (it answered badly).
        """
        deadline = time.monotonic() + timeout_s
        endpoint = self._discover()
        connection = self._connect(endpoint, timeout_s)
        ping = {"requestId": f"host_ping_{os.urandom(6).hex()}", "type": "ping", "payload": {}}
        budget_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            response = self._exchange(
                connection,
                Attempt(),
                codec.encode(ping),
                budget_ms,
                errors.STAGE_WAIT_FOR_CORE_RUNTIME,
            )
        finally:
            connection.close()
        if not response["ok"]:
            raise errors.HostError(
                errors.CORE_RUNTIME_UNAVAILABLE,
                errors.MSG_APP_NOT_RUNNING,
                errors.STAGE_WAIT_FOR_CORE_RUNTIME,
                error=f"ping answered {response['error'].get('code')}",
            )
        result = response["result"]
        process_id = result.get("processId") if isinstance(result, dict) else None
        if isinstance(process_id, int) and process_id != endpoint.pid:
            raise CoreUnreachableError(
                errors.STAGE_VERIFY_CORE,
                reason="the Core's ping names another process than runtime.json",
                violation="pid_mismatch",
                endpoint=endpoint.endpoint,
            )
        return endpoint, result

    def probe(self, deadline: float) -> bool:
        """Readiness (spec 7.14 step 7): a valid, fresh, verified Core answers a ping
        ok:true, each phase bounded by the connect timeout and the time left."""
        if self.stopping.is_set():
            return False
        budget = min(self.config.connect_timeout_ms / 1000, deadline - time.monotonic())
        try:
            self.ping(max(budget, _MIN_PROBE_S))
        except (CoreUnreachableError, errors.HostError):
            return False
        return True

    def close_all(self) -> None:
        """Shutdown: close every connection, requests and streams alike (spec 7.13)."""
        self.registry.close_all()

    # --- before the first byte ---------------------------------------------------------
    def _discover(self) -> CoreEndpoint:
        from native_host import paths

        try:
            home = paths.pedelec_home(self.env)
        except (RuntimeError, KeyError, OSError):
            raise errors.HostError(
                errors.IPC_UNAVAILABLE, errors.MSG_HOME_UNRESOLVABLE, errors.STAGE_DISCOVER_CORE
            ) from None
        return read_runtime(home, check_pid=self.config.check_runtime_pid)

    def _connect(self, endpoint: CoreEndpoint, timeout_s: float | None = None) -> CoreConnection:
        """Connect and check who answers (before any byte is written).

        A connection the Core closed before the check is opened once more (nothing was
        sent, spec 7.5): a listener that accepted is a Core shutting down or overloaded,
        not a down Core, so closing twice is answered at once and never starts a launch.
        A Core that died meanwhile refuses the second connect, which does count as down.
        """
        try:
            return self._connect_once(endpoint, timeout_s)
        except _ClosedBeforeFirstByteError as first:
            log.info("the Core on %s closed a connection unused (%s)", endpoint.endpoint, first)
        try:
            return self._connect_once(endpoint, timeout_s)
        except _ClosedBeforeFirstByteError as again:
            raise errors.HostError(
                errors.IPC_UNAVAILABLE,
                errors.MSG_CORE_CLOSED_UNUSED,
                errors.STAGE_CONNECT_CORE,
                endpoint=endpoint.endpoint,
                error=str(again),
            ) from None

    def _connect_once(self, endpoint: CoreEndpoint, timeout_s: float | None) -> CoreConnection:
        limit = self.config.connect_timeout_ms / 1000
        timeout = limit if timeout_s is None else max(0.001, min(limit, timeout_s))
        try:
            sock = connect_socket(endpoint, timeout)
        except OSError as exc:
            if is_resource_error(exc):
                raise errors.resources_exhausted(errors.STAGE_CONNECT_CORE, str(exc)) from None
            raise CoreUnreachableError(
                errors.STAGE_CONNECT_CORE, endpoint=endpoint.endpoint, error=str(exc) or repr(exc)
            ) from None
        try:
            self.registry.add(sock)
        except OSError as exc:
            raise CoreUnreachableError(
                errors.STAGE_CONNECT_CORE, endpoint=endpoint.endpoint, error=str(exc)
            ) from None
        connection = CoreConnection(sock, endpoint, self.registry)
        try:
            self._verify_peer(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _verify_peer(self, connection: CoreConnection) -> None:
        """Refuse a listener that is not the user's Core (docs/security.md): another user
        who binds a stale Core port must receive zero bytes. A refused Core counts as
        down for the launch logic (the Desktop then starts a genuine one on a new port)."""
        endpoint = connection.endpoint
        try:
            verdict = peer.verify_core_peer(
                connection.sock, endpoint.pid, self.config.check_runtime_pid
            )
        except peer.PeerRefusedError as exc:
            if exc.reason == peer.RESOURCES:
                raise errors.resources_exhausted(errors.STAGE_VERIFY_CORE, exc.detail) from None
            if exc.reason == peer.CONNECTION_GONE:
                raise _ClosedBeforeFirstByteError(exc.explanation) from None
            log.warning("refused the listener on %s: %s", endpoint.endpoint, exc.reason)
            raise CoreUnreachableError(
                errors.STAGE_VERIFY_CORE,
                reason=exc.explanation,
                violation=exc.reason,
                endpoint=endpoint.endpoint,
            ) from None
        log.debug("core on %s verified (%s)", endpoint.endpoint, verdict)

    def _open(self, attempt: Attempt, stage: str | None) -> CoreConnection:
        """A verified connection, launching the Desktop once if the Core is down and
        re-attempting once (spec 7.5, 7.14). Nothing has been sent yet."""
        self.refuse_resend(attempt, stage)
        try:
            return self._connect(self._discover())
        except CoreUnreachableError as first:
            why = first.details.get("violation") or first.details.get("reason") or "refused"
            log.info("Core unreachable (%s: %s); launching the desktop app", first.stage, why)
        self.launcher.ensure_running()
        try:
            return self._connect(self._discover())
        except CoreUnreachableError as again:
            raise again.to_host_error() from None

    # --- from the first byte on ----------------------------------------------------------
    def _exchange(
        self,
        connection: CoreConnection,
        attempt: Attempt,
        line: bytes,
        timeout_ms: int | None,
        stage: str | None,
        on_other_line: Callable[[Any], bool] | None = None,
    ) -> dict[str, Any]:
        stages = _stages(stage)
        deadline = None if timeout_ms is None else attempt.admitted + timeout_ms / 1000
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.response_timed_out(stages[1], timeout_ms)  # never written late
        attempt.written = True
        connection.send(line, deadline, timeout_ms, stages)
        return connection.read_response(deadline, timeout_ms, stages[1], on_other_line)
