"""The admission queue on its own: which request gets a freed place, and which bound
refuses one (docs/security.md). Places are freed by hand, so every order is exact."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from native_host.admission import Admission, Attempt, Ticket
from native_host.errors import HostError

pytestmark = pytest.mark.unit


class Recorder:
    """Tickets that were started (with their Attempt) or expired, in order."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.attempts: dict[str, Attempt] = {}
        self.expired: dict[str, HostError] = {}
        self.changed = threading.Event()

    def ticket(self, name: str, origin: str | None = None, size: int = 1, **kwargs: Any) -> Ticket:
        def start(attempt: Attempt) -> None:
            self.started.append(name)
            self.attempts[name] = attempt

        def expire(error: HostError) -> None:
            self.expired[name] = error
            self.changed.set()

        timeout_ms = kwargs.pop("timeout_ms", 60_000)
        return Ticket(size, origin, timeout_ms, "await_core_response", start, expire, **kwargs)

    def finish(self, name: str) -> None:
        self.attempts[name].release()


def admission(**caps: int) -> Admission:
    values = {"max_requests": 2, "max_untimed": 1, "max_bytes": 100}
    values.update(max_queued=10, max_queued_bytes=1000)
    values.update(caps)
    return Admission(**values)


def refusal(gate: Admission, ticket: Ticket) -> dict[str, Any]:
    with pytest.raises(HostError) as caught:
        gate.admit(ticket)
    assert caught.value.code == "HOST_BUSY"
    return caught.value.details


def test_a_freed_place_goes_round_robin_and_a_newcomer_is_next() -> None:
    gate, calls = admission(), Recorder()
    for index in range(5):
        gate.admit(calls.ticket(f"a{index}", "https://a.example"))
    assert calls.started == ["a0", "a1"]
    calls.finish("a0")
    assert calls.started == ["a0", "a1", "a2"]
    gate.admit(calls.ticket("b0", "https://b.example"))
    gate.admit(calls.ticket("b1", "https://b.example"))
    calls.finish("a1")  # b0 is next although a3 has waited longer
    calls.finish("a2")
    calls.finish("b0")
    calls.finish("a3")
    assert calls.started == ["a0", "a1", "a2", "b0", "a3", "b1", "a4"]


def test_releasing_twice_frees_one_place() -> None:
    gate, calls = admission(), Recorder()
    for index in range(4):
        gate.admit(calls.ticket(f"r{index}"))
    calls.finish("r0")
    calls.finish("r0")
    assert calls.started == ["r0", "r1", "r2"]


def test_untimed_requests_have_their_own_places_and_queue() -> None:
    gate, calls = admission(), Recorder()
    gate.admit(calls.ticket("pick0", timeout_ms=None))
    gate.admit(calls.ticket("pick1", timeout_ms=None))
    gate.admit(calls.ticket("t0"))
    assert calls.started == ["pick0", "t0"]
    calls.finish("pick0")
    assert calls.started == ["pick0", "t0", "pick1"]


def test_host_local_requests_never_wait_behind_core_requests() -> None:
    gate, calls = admission(max_requests=1, max_bytes=100), Recorder()
    gate.admit(calls.ticket("slow", size=100))
    gate.admit(calls.ticket("queued"))
    gate.admit(calls.ticket("ping", size=10, local=True))
    assert calls.started == ["slow", "ping"]


def test_a_head_too_big_for_the_bytes_left_waits_and_nothing_overtakes_it() -> None:
    gate, calls = admission(), Recorder()
    gate.admit(calls.ticket("small", size=60))
    gate.admit(calls.ticket("big", size=60))
    gate.admit(calls.ticket("tiny", size=1))
    assert calls.started == ["small"]
    calls.finish("small")
    assert calls.started == ["small", "big", "tiny"]


def test_each_bound_of_the_queue_is_named_when_it_refuses() -> None:
    gate, calls = admission(max_requests=32, max_queued=4, max_queued_bytes=1000), Recorder()
    for index in range(32):
        gate.admit(calls.ticket(f"run{index}", "https://a.example"))
    gate.admit(calls.ticket("qa0", "https://a.example"))
    gate.admit(calls.ticket("qa1", "https://a.example"))
    details = refusal(gate, calls.ticket("qa2", "https://a.example"))
    assert details == {"stage": "admit_request", "reason": "origin_queued_requests", "limit": 2}
    gate.admit(calls.ticket("qb0", "https://b.example"))
    gate.admit(calls.ticket("qc0", "https://c.example"))
    details = refusal(gate, calls.ticket("qd0", "https://d.example"))
    assert details == {"stage": "admit_request", "reason": "queued_requests", "limit": 4}


def test_the_queues_bytes_and_an_origins_half_of_them_are_bounds() -> None:
    gate, calls = admission(max_bytes=100, max_queued_bytes=200), Recorder()
    gate.admit(calls.ticket("run", "https://a.example", size=100))
    gate.admit(calls.ticket("qa0", "https://a.example", size=100))
    details = refusal(gate, calls.ticket("qa1", "https://a.example", size=1))
    assert details["reason"] == "origin_queued_bytes" and details["limit"] == 100
    gate.admit(calls.ticket("qb0", "https://b.example", size=100))
    details = refusal(gate, calls.ticket("qc0", "https://c.example", size=1))
    assert details["reason"] == "queued_bytes" and details["limit"] == 200
    calls.finish("run")
    gate.admit(calls.ticket("qc1", "https://c.example", size=100))  # qa0 left the queue


def test_a_queued_request_past_its_deadline_is_answered_and_loses_its_turn() -> None:
    gate, calls = admission(max_requests=1), Recorder()
    gate.admit(calls.ticket("run"))
    gate.admit(calls.ticket("late", timeout_ms=1))
    gate.admit(calls.ticket("patient"))
    assert calls.changed.wait(30)
    error = calls.expired["late"]
    assert error.to_error()["details"] == {
        "stage": "await_core_response",
        "timeoutMs": 1,
        "queued": True,
    }
    calls.finish("run")
    assert calls.started == ["run", "patient"]


def test_a_queued_request_counts_its_timeout_from_admission() -> None:
    gate, calls = admission(max_requests=1), Recorder()
    gate.admit(calls.ticket("run"))
    queued = calls.ticket("queued", timeout_ms=60_000)
    gate.admit(queued)
    calls.finish("run")
    assert calls.attempts["queued"].admitted == queued.admitted


def test_nothing_starts_once_the_host_stops() -> None:
    stopping = threading.Event()
    gate = Admission(1, 1, 100, 10, 1000, stopping)
    calls = Recorder()
    gate.admit(calls.ticket("run"))
    gate.admit(calls.ticket("queued"))
    stopping.set()
    calls.finish("run")
    assert calls.started == ["run"]
