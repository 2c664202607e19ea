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

from native_host.devcore import DevCore
from native_host.errors import MSG_INTERNAL
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

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


def test_five_thousand_slow_requests_are_answered_with_threads_and_fds_bounded(
    world: HostWorld,
) -> None:
    core = world.start_core(
        "legacy",
        gate_types={"send_text"},
        canned_responses={"send_text": {"ok": True, "result": {"threadId": "t000001"}}},
    )
    host = world.start_host()
    for index in range(5000):
        host.send({"type": "send_text", "requestId": f"r{index}", "threadId": "t1", "message": "x"})
    refused = replies_until_the_rest_are_held(host, core, 5000)
    held = core.gated
    peak_threads, peak_fds = threads_of(host.proc.pid), fds_of(host.proc.pid)
    core.open_gate()
    answered = [host.read(timeout=60) for _ in range(held)]
    replies = refused + answered
    assert sorted(r["requestId"] for r in replies) == sorted(f"r{i}" for i in range(5000))
    assert {busy(r) for r in refused} == {"in_flight_requests"}
    assert all(r["ok"] for r in answered), answered
    assert 32 <= held <= 64, held
    assert peak_threads < 100, peak_threads
    assert peak_fds < 100, peak_fds
    assert host.request({"type": "ping", "requestId": "after"})["ok"]


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
    assert refused <= {"subscriptions", "in_flight_requests"}, refused
    assert "subscriptions" in refused
    assert threads_of(host.proc.pid) < 300
    assert fds_of(host.proc.pid) < 300
    assert core.connection_count < 1000 + 256 + 64
    live = next(r for r in fresh)["requestId"]
    live_thread = thread_ids[int(live[1:]) % 1000]
    again = host.request(
        {"type": "subscribe_thread", "requestId": "again", "threadId": live_thread}
    )
    assert again["result"] == {"subscribed": True, "duplicate": True}


def test_megabyte_requests_in_flight_are_capped_by_bytes_and_memory_stays_bounded(
    world: HostWorld,
) -> None:
    core = world.start_core(
        "legacy",
        gate_types={"send_text"},
        canned_responses={"send_text": {"ok": True, "result": {"threadId": "t000001"}}},
    )
    host = world.start_host()
    text = "x" * 1_000_000
    for index in range(300):
        host.send(
            {"type": "send_text", "requestId": f"r{index}", "threadId": "t1", "message": text}
        )
    refused = replies_until_the_rest_are_held(host, core, 300)
    held = core.gated
    rss = rss_kib(host.proc.pid)  # every admitted megabyte is in flight now
    core.open_gate()
    answered = [host.read(timeout=60) for _ in range(held)]
    assert {busy(r) for r in refused} == {"in_flight_bytes"}
    assert all(r["ok"] for r in answered), answered
    assert 1 <= held <= 33, held
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
    assert "HOST_RESOURCES_EXHAUSTED" in codes, replies
    assert codes <= {"HOST_RESOURCES_EXHAUSTED"}, codes
    assert not marker.exists(), "an fd shortage triggered a Desktop launch"
    assert host.request({"type": "ping", "requestId": "after"}, timeout=10)["ok"]
