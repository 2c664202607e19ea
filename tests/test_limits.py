"""What one page can make the host hold: caps answered at once, resources bounded
(docs/security.md, spec 7.1 "any cap on in-flight Core requests MUST be at least 32").

Everything runs through the real host process against the dev Core; threads and file
descriptors are counted from /proc while the load is on.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from native_host.codec import encode as encode_message
from native_host.devcore import DevCore
from native_host.errors import MSG_INTERNAL
from tests.support.host import HostUnderTest
from tests.support.markers import needs_os
from tests.support.world import HostWorld

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="threads and descriptors are counted through /proc"),
]

APP = "https://app.example.com"


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def fds_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def busy(reply: dict[str, Any]) -> str | None:
    """The cap that refused a reply (`details.reason`), or None."""
    error = reply.get("error") or {}
    if error.get("code") != "HOST_BUSY":
        return None
    assert error["details"]["stage"] == "admit_request"
    assert isinstance(error["details"]["limit"], int)
    return str(error["details"]["reason"])


SLOW_SEND_TEXT: dict[str, Any] = {
    "canned_responses": {"send_text": {"ok": True, "result": {"threadId": "t000001"}}},
}


def send_text(request_id: str, origin: str | None = None, text: str = "x") -> dict[str, Any]:
    message: dict[str, Any] = {
        "type": "send_text",
        "requestId": request_id,
        "threadId": "t1",
        "message": text,
    }
    if origin is not None:
        message["callerOrigin"] = origin
    return message


class Peaks:
    """The most threads and descriptors the host held while its replies were read."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.threads = 0
        self.fds = 0

    def sample(self) -> None:
        self.threads = max(self.threads, threads_of(self.pid))
        self.fds = max(self.fds, fds_of(self.pid))


def read_replies(host: HostUnderTest, count: int, peaks: Peaks) -> list[dict[str, Any]]:
    replies = []
    for index in range(count):
        if index % 25 == 0:
            peaks.sample()
        replies.append(host.read(timeout=60))
    return replies


def replies_until_the_rest_are_held(
    host: Any, core: DevCore, count: int, timeout: float = 300
) -> list[dict[str, Any]]:
    """Read replies until every one of `count` requests is answered or held at the dev
    Core's gate (`gate_types`): then the load is at its peak, however slow the machine."""
    replies: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(replies) + core.gated < count:
        assert time.monotonic() < deadline, f"{len(replies)} answered, {core.gated} held"
        with contextlib.suppress(TimeoutError):
            replies.append(host.read(timeout=0.2))
    return replies


def test_five_thousand_slow_requests_queue_up_to_the_origins_share_the_rest_refused(
    world: HostWorld,
) -> None:
    """One page floods 5,000 slow requests: 64 run, 2,048 (its half of the queue) wait
    without a thread each and are answered ok; the rest are refused at once."""
    world.start_core("legacy", delay_ms={"send_text": 300}, **SLOW_SEND_TEXT)
    host = world.start_host()
    for index in range(5000):
        host.send(send_text(f"r{index}"))
    peaks = Peaks(host.proc.pid)
    replies = read_replies(host, 5000, peaks)
    by_id = {r["requestId"]: r for r in replies}
    assert sorted(by_id) == sorted(f"r{i}" for i in range(5000))
    assert all(by_id[f"r{i}"]["ok"] for i in range(64 + 2048)), "refused within the queue"
    refused = [r for r in replies if not r["ok"]]
    assert refused, "5,000 slow requests all fitted into 64 places and a 2,048 share"
    assert {busy(r) for r in refused} == {"origin_queued_requests"}
    assert {r["error"]["details"]["limit"] for r in refused} == {2048}
    assert peaks.threads < 100, peaks.threads
    assert peaks.fds < 100, peaks.fds
    assert host.request({"type": "ping", "requestId": "after"})["ok"]


@pytest.mark.parametrize("count", [100, 1000])
@pytest.mark.parametrize("origins", [1, 20])
def test_slow_requests_beyond_the_running_places_are_all_answered_ok(
    world: HostWorld, count: int, origins: int
) -> None:
    """From one page or from 20: every request is answered ok, while the threads and
    descriptors stay those of the 64 running places."""
    world.start_core("legacy", delay_ms={"send_text": 500}, **SLOW_SEND_TEXT)
    host = world.start_host()
    pages = [f"https://app{i}.example.com" for i in range(origins)]
    for index in range(count):
        host.send(send_text(f"r{index}", pages[index % origins]))
    peaks = Peaks(host.proc.pid)
    replies = read_replies(host, count, peaks)
    assert sorted(r["requestId"] for r in replies) == sorted(f"r{i}" for i in range(count))
    assert [r for r in replies if not r["ok"]] == []
    assert peaks.threads < 100, peaks.threads
    assert peaks.fds < 100, peaks.fds


def test_a_page_behind_another_pages_flood_starts_at_the_next_free_place(
    world: HostWorld,
) -> None:
    """Fairness: 200 slow requests of one page hold the 32 places and queue; another
    page's single request gets the next place that frees, so it is answered within
    about two rounds of the flood (FIFO would answer it after all 200)."""
    world.write_config({"maxInFlightRequests": 32})
    world.start_core("legacy", delay_ms={"send_text": 1500}, **SLOW_SEND_TEXT)
    host = world.start_host()
    for index in range(200):
        host.send(send_text(f"flood{index}", "https://flood.example.com"))
    host.send(send_text("single", "https://other.example.com"))
    replies = [host.read(timeout=60) for _ in range(201)]
    assert all(r["ok"] for r in replies)
    order = [r["requestId"] for r in replies]
    assert order.index("single") < 32 * 2 + 16, order.index("single")


def test_a_request_whose_deadline_passes_in_the_queue_gets_its_timeout_error(
    world: HostWorld,
) -> None:
    """The response timeout counts from admission: requests queued behind 32 hung ones
    are answered with the timeout error at their deadline, and never reach the Core."""
    world.write_config({"maxInFlightRequests": 32, "coreResponseTimeoutMs": 1000})
    core = world.start_core("current", hang_types={"workspace_run"})
    host = world.start_host()
    for index in range(32):
        host.send(
            {
                "type": "workspace_run",
                "requestId": f"hung{index}",
                "workspaceId": "ws_1",
                "script": "1",
                "timeoutMs": 600_000,
                "callerOrigin": APP,
            }
        )
    for index in range(5):
        host.send({"type": "list_providers", "requestId": f"late{index}"})
    replies = [host.read(timeout=30) for _ in range(5)]
    assert sorted(r["requestId"] for r in replies) == [f"late{i}" for i in range(5)]
    for reply in replies:
        assert reply["ok"] is False
        assert reply["error"]["code"] == "IPC_UNAVAILABLE"
        assert reply["error"]["message"] == "Core IPC response timed out"
        details = reply["error"]["details"]
        assert details == {"stage": "await_core_response", "timeoutMs": 1000, "queued": True}
    assert core.requests("list_providers") == []
    assert len(core.requests("workspace_run")) == 32


def test_eof_with_requests_queued_exits_at_once(world: HostWorld, wait_until: Any) -> None:
    """Queued requests are abandoned on EOF like running ones (spec 7.13): the 32 in
    flight reached the Core before the EOF, and none of the 500 queued ever does."""
    world.write_config({"maxInFlightRequests": 32})
    core = world.start_core("legacy", hang_types={"send_text"})
    host = world.start_host()
    for index in range(532):
        host.send(send_text(f"r{index}"))
    # a host-local request does not wait behind the 500 queued ones
    assert host.request({"type": "list_origin_approvals", "requestId": "sync"}, timeout=60)["ok"]
    # the in-flight ones' connections may still be on their way (under load, 25 of 32)
    assert wait_until(lambda: len(core.requests("send_text")) == 32)
    host.close_stdin()
    assert host.wait(timeout=5) == 0
    assert len(core.requests("send_text")) == 32


def test_five_thousand_subscriptions_stay_within_the_cap(world: HostWorld) -> None:
    """1,000 threads subscribed five times each: at most 256 live streams (the default
    cap), every subscribe answered at once, duplicates of live keys still served."""
    core = world.start_core("legacy")
    host = world.start_host()
    thread_ids = [
        host.request({"type": "create_thread", "requestId": f"c{i}", "provider": "codex"})[
            "result"
        ]["threadId"]
        for i in range(1000)
    ]
    for index in range(5000):
        thread_id = thread_ids[index % 1000]
        host.send({"type": "subscribe_thread", "requestId": f"s{index}", "threadId": thread_id})
    replies = [host.read(timeout=60) for _ in range(5000)]
    fresh = [r for r in replies if r["ok"] and "duplicate" not in r["result"]]
    refused = {busy(r) for r in replies if not r["ok"]}
    assert 32 <= len(fresh) <= 256, len(fresh)
    assert "subscriptions" in refused
    assert refused <= {"subscriptions", "origin_queued_requests"}, refused
    note = next(r for r in replies if busy(r) == "subscriptions")["error"]["details"]["note"]
    assert "never queued" in note
    assert threads_of(host.proc.pid) < 300
    assert fds_of(host.proc.pid) < 300
    assert core.connection_count < 1000 + 256 + 64
    live = next(r for r in fresh)["requestId"]
    live_thread = thread_ids[int(live[1:]) % 1000]
    again = host.request(
        {"type": "subscribe_thread", "requestId": "again", "threadId": live_thread}
    )
    assert again["result"] == {"subscribed": True, "duplicate": True}


@pytest.mark.parametrize("origins", [1, 3])
def test_a_flood_past_the_queues_bytes_is_refused_at_once_and_memory_stays_bounded(
    world: HostWorld, origins: int
) -> None:
    """300 requests of 1 MB to a Core that never answers: 32 MiB run, 32 MiB wait (16 MiB
    of them for one origin); every other request is answered HOST_BUSY while those wait."""
    world.start_core("legacy", hang_types={"send_text"})
    host = world.start_host()
    text = "x" * 1_000_000
    pages = [f"https://app{i}.example.com" for i in range(origins)]
    flood = [send_text(f"r{index:03}", pages[index % origins], text) for index in range(300)]
    size = len(encode_message(flood[0]))
    assert {len(encode_message(m)) for m in flood} == {size}
    running = 33_554_432 // size
    queued = min(origins * (16_777_216 // size), 33_554_432 // size)
    for message in flood:
        host.send(message)
    replies = [host.read(timeout=60) for _ in range(300 - running - queued)]
    assert host.no_frame_within(1.0), "more refusals than the bounds allow"
    rss = rss_kib(host.proc.pid)
    reasons = {busy(r) for r in replies}
    if origins == 1:
        assert reasons == {"origin_queued_bytes"}
    else:
        assert "queued_bytes" in reasons
        assert reasons <= {"queued_bytes", "origin_queued_bytes"}
    assert rss < 250_000, f"{rss} KiB with 300 MB sent"


def test_a_huge_page_supplied_run_timeout_neither_crashes_nor_holds_forever(
    world: HostWorld,
) -> None:
    """`workspace_run.timeoutMs` of 1e13 once made the request crash (a socket timeout
    beyond what the OS takes); it is now clamped for the host's own wait."""
    world.start_core("current")
    host = world.start_host()
    for value in (10**13, 10**9, 2**63):
        reply = host.request(
            {
                "type": "workspace_run",
                "requestId": f"run{value}",
                "workspaceId": "ws_missing",
                "script": "1",
                "timeoutMs": value,
                "callerOrigin": APP,
            }
        )
        assert reply["ok"] is False
        assert reply["error"]["message"] != MSG_INTERNAL
        assert "stage" not in reply["error"].get("details", {}), reply  # the Core's own answer


def test_out_of_file_descriptors_is_a_resource_error_not_a_launch(world: HostWorld) -> None:
    """At the fd limit, reading runtime.json must not look like "the Core is down"."""
    core = world.start_core(
        "legacy",
        gate_types={"send_text"},
        canned_responses={"send_text": {"ok": True, "result": {"threadId": "t000001"}}},
    )
    marker = world.root / "launched"
    app = world.root / "app"
    app.write_text(f"#!/bin/sh\ntouch {marker}\n")
    app.chmod(0o755)
    (world.home / "app-launch.json").write_text(
        f'{{"version":1,"executablePath":"{app}","backgroundArgs":["--background"]}}'
    )

    host = world.start_host(prefix=("prlimit", "--nofile=24:24", "--"))
    for index in range(40):
        host.send({"type": "send_text", "requestId": f"r{index}", "threadId": "t1", "message": "x"})
    refused = replies_until_the_rest_are_held(host, core, 40)  # each held one holds an fd
    held = core.gated
    core.open_gate()
    replies = refused + [host.read(timeout=30) for _ in range(held)]
    assert sorted(r["requestId"] for r in replies) == sorted(f"r{i}" for i in range(40))
    codes = {r["error"]["code"] for r in replies if not r["ok"]}
    exhausted = "HOST_RESOURCES_EXHAUSTED"
    assert exhausted in codes, replies
    others = [r for r in replies if not r["ok"] and r["error"]["code"] != exhausted]
    assert codes <= {exhausted}, others
    assert not marker.exists(), "an fd shortage triggered a Desktop launch"
    assert host.request({"type": "ping", "requestId": "after"}, timeout=10)["ok"]
