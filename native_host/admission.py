"""Admission: what one host runs at once, and the bounded, fair queue behind it
(docs/security.md, "Caps").

A request holds a running place (a thread and a Core connection) from its start to its
answer; beyond the places it waits as a `Ticket`, which holds no thread, until a place
frees or its deadline passes. The gateway admits every request through here, so the
caps hold for relayed requests, subscriptions and host-local answers alike.
"""

from __future__ import annotations

import _thread
import collections
import time

from native_host import errors, logs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable


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
