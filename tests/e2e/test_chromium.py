"""End to end with a real headless Chromium: page → test extension → connectNative →
pedelec-native-host (registered with `install --user-data-dir`) → dev Core (current).

Each test starts the browser on a page that runs one scenario (tests/e2e/page/page.js) and
asserts on what the page and the extension report, the dev Core's record, the host's log and
/proc. See docs/e2e.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from native_host.codec import MAX_DEPTH
from native_host.devcore import Faults
from native_host.framing import MAX_FRAME_BYTES
from tests.e2e import harness
from tests.e2e.world import E2EWorld

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("chromium")]  # one world per module

RunPage = Callable[..., E2EWorld]


def _ok(report: dict[str, Any]) -> Any:
    """The result of a successful response reported by the page."""
    response = report["response"]
    assert isinstance(response, dict), report
    assert response["type"] == "response" and response["ok"] is True, response
    return response["result"]


def _native_request(world: E2EWorld, request_id: str) -> dict[str, Any]:
    """The message the extension sent to the host with this requestId (as it reported it)."""
    report = world.extension_report(
        "native_request", lambda r: r["message"]["requestId"] == request_id
    )
    return dict(report["message"])


def _frame_bytes(message: object) -> int:
    """The size of a frame body as the host writes it (compact UTF-8 JSON)."""
    return len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode())


def test_lifecycle_through_the_browser(run_page: RunPage) -> None:
    """ping, list_providers, get_settings, create_thread (tool + page origin), subscribe with
    a snapshot, send_text → "echo: hello", end_thread → ended."""
    world = run_page("lifecycle")
    origin = world.page.origin

    ping = world.step("ping")
    assert isinstance(_ok(ping), dict)
    assert isinstance(_ok(world.step("list_providers")), dict | list)
    assert isinstance(_ok(world.step("get_settings")), dict)

    created = world.step("create_thread")
    thread_id = _ok(created)["threadId"]
    request_id = created["response"]["requestId"]
    record = [r for r in world.core.requests("create_thread") if r.request_id == request_id]
    assert len(record) == 1
    assert record[0].caller_origin == origin
    tools = record[0].payload["skills"]["tools"]
    assert [t["name"] for t in tools] == ["update_counter"]
    # The extension's key order: payload fields, then type, requestId, callerOrigin.
    sent = _native_request(world, request_id)
    assert list(sent) == ["provider", "skills", "type", "requestId", "callerOrigin"]
    assert sent["callerOrigin"] == origin
    for step in ("ping", "list_providers", "get_settings"):
        rid = world.step(step)["response"]["requestId"]
        assert "callerOrigin" not in _native_request(world, rid)
        (core_request,) = [r for r in world.core.requests(step) if r.request_id == rid]
        assert core_request.caller_origin is None

    subscribed = _ok(world.step("subscribe_thread"))
    assert subscribed["subscribed"] is True
    assert subscribed["snapshot"]["threadId"] == thread_id
    assert subscribed["snapshot"]["status"] == "idle"

    assert _ok(world.step("send_text"))
    reply = world.step("assistant_message")["event"]
    assert reply["text"] == "echo: hello"
    assert reply["threadId"] == thread_id
    (send,) = [r for r in world.core.requests("send_text") if r.payload["threadId"] == thread_id]
    assert send.caller_origin == origin

    _ok(world.step("end_thread"))
    assert world.step("ended")["event"]["type"] == "ended"
    world.step("done")


def test_tool_call_round_trip(run_page: RunPage) -> None:
    """/tool update_counter → tool_call → the page's submit_tool_result → tool_result and
    the echoed reply."""
    world = run_page("tool")
    thread_id = world.step("subscribe_thread")["threadId"]
    call = world.step("tool_call")["event"]
    assert call["toolName"] == "update_counter"
    assert call["args"] == {"delta": 2}
    assert call["requestId"].startswith("toolreq_")

    _ok(world.step("submit_tool_result"))
    (submit,) = [
        r for r in world.core.requests("submit_tool_result") if r.payload["threadId"] == thread_id
    ]
    assert submit.payload["requestId"] == call["requestId"]
    assert submit.payload["result"] == {"counter": 2}
    assert submit.caller_origin == world.page.origin

    assert world.step("tool_result")["event"]["threadId"] == thread_id
    reply = world.step("assistant_message")["event"]
    assert reply["text"] == 'echo: tool update_counter returned {"counter":2}'
    world.step("done")


def test_events_at_the_one_mib_cap(run_page: RunPage) -> None:
    """An event whose frame is just under 1 MiB arrives whole; one over it ends the current
    stream with thread_subscription_closed MESSAGE_TOO_LARGE; the native port stays up."""
    world = run_page("oversize")
    thread_id = world.step("subscribe_thread")["threadId"]

    def frame(text_length: int, seq: int) -> dict[str, Any]:
        event = {"type": "assistant_message", "text": "x" * text_length}
        return {"type": "thread_event", "event": {**event, "seq": seq, "threadId": thread_id}}

    margin = 16  # room for the seq's digits
    overhead = _frame_bytes(frame(0, 0))
    under = MAX_FRAME_BYTES - overhead - margin
    emitted = world.core.emit_event(thread_id, {"type": "assistant_message", "text": "x" * under})
    expected = _frame_bytes({"type": "thread_event", "event": emitted})
    assert MAX_FRAME_BYTES - 2 * margin < expected <= MAX_FRAME_BYTES
    over = MAX_FRAME_BYTES - overhead + 64
    emitted_over = world.core.emit_event(
        thread_id, {"type": "assistant_message", "text": "x" * over}
    )

    arrived = world.step("under_cap")
    assert arrived["textLength"] == under
    assert arrived["seq"] == emitted["seq"]
    assert arrived["bytes"] == expected

    closed = world.step("over_cap")["message"]
    assert closed["threadId"] == thread_id
    assert closed["error"]["code"] == "MESSAGE_TOO_LARGE"
    details = closed["error"]["details"]
    assert details["stage"] == "relay_event"
    assert details["eventType"] == "assistant_message"
    assert details["sizeBytes"] > MAX_FRAME_BYTES
    assert details.get("seq", emitted_over["seq"]) == emitted_over["seq"]

    after = world.step("ping_after")
    _ok(after)
    assert after["disconnects"] == []
    assert world.extension_reports("native_disconnect") == []
    # The extension saw the big frame at the size the host wrote it, and nothing bigger.
    world.extension_report("native_message", lambda r: r["bytes"] == expected)
    assert max(r["bytes"] for r in world.extension_reports("native_message")) == expected
    world.step("done")


def _nested(depth: int) -> Any:
    """Arrays nested `depth` deep: `[[...[]...]]`."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_events_at_the_nesting_limit(run_page: RunPage) -> None:
    """An event frame nested exactly codec.MAX_DEPTH deep reaches the extension (Chromium's
    JSON reader reads it); one a level deeper ends the current stream with
    thread_subscription_closed MESSAGE_TOO_LARGE instead of making Chrome close the port."""
    world = run_page("nesting")
    thread_id = world.step("subscribe_thread")["threadId"]
    frame_levels = 2  # {"type":"thread_event","event":{..., "nested": <here>}}
    at_limit = MAX_DEPTH - frame_levels
    emitted = world.core.emit_event(
        thread_id, {"type": "assistant_message", "text": "deep", "nested": _nested(at_limit)}
    )
    emitted_past = world.core.emit_event(
        thread_id, {"type": "assistant_message", "text": "deeper", "nested": _nested(at_limit + 1)}
    )

    arrived = world.step("at_limit")
    assert arrived == {**arrived, "seq": emitted["seq"], "nestedDepth": at_limit}

    closed = world.step("past_limit")["message"]
    assert closed["threadId"] == thread_id
    assert closed["error"]["code"] == "MESSAGE_TOO_LARGE"
    assert closed["error"]["details"] == {
        "stage": "relay_event",
        "eventType": "assistant_message",
        "seq": emitted_past["seq"],
        "limitDepth": MAX_DEPTH,
    }
    after = world.step("ping_after")
    _ok(after)
    assert after["disconnects"] == []
    assert world.extension_reports("native_disconnect") == []
    world.step("done")


def test_host_exits_when_the_extension_disconnects(run_page: RunPage) -> None:
    """port.disconnect() in the extension → the host exits by itself (logs exit status 0),
    and no host process of this world remains."""
    world = run_page("disconnect")
    _ok(world.step("ping"))
    world.step("disconnected")
    starts = world.host_starts()
    assert len(starts) == 1, starts
    pid = starts[0]
    assert harness.wait_until(lambda: not harness.host_pids(world.state_dir)), (
        f"host processes still running after the disconnect: {harness.host_pids(world.state_dir)}"
    )
    assert harness.wait_until(lambda: world.host_exit_status(pid) == 0), (
        f"host {pid} did not log 'exit status=0' (killed by the browser?)\n{world.diagnostics()}"
    )
    world.step("done")


def test_second_connect_native_starts_a_fresh_host(run_page: RunPage) -> None:
    """connectNative, disconnect, connectNative again: a new host process (another pid)
    answers ping, and the first one is gone."""
    world = run_page("reconnect")
    _ok(world.step("first_ping"))
    _ok(world.step("second_ping"))
    world.step("done")
    starts = world.host_starts()
    assert len(starts) == 2, starts
    first, second = starts
    assert first != second
    assert harness.wait_until(lambda: harness.host_pids(world.state_dir) == [second]), (
        f"expected only host {second} running, found {harness.host_pids(world.state_dir)}"
    )
    assert harness.wait_until(lambda: world.host_exit_status(first) == 0)


def test_twenty_tabs_share_one_host_and_every_slow_request_is_answered(
    e2e: E2EWorld, run_page: RunPage
) -> None:
    """20 tabs on one native port (as the real extension 0.4.6 keeps it) each fire 5
    list_providers at once while the Core takes 2 s for each: 100 requests for 64 running
    places, all answered ok by the one host process (none refused as HOST_BUSY)."""
    tabs, burst = 20, 5
    before = e2e.core.faults
    e2e.core.faults = Faults(delay_ms={"list_providers": 2000})
    try:
        world = run_page("tabs", tabs=str(tabs), burst=str(burst))
        world.step("opened")

        def bursts() -> list[dict[str, Any]]:
            return [
                r
                for r in world.page.reports.all()
                if r.get("from") == "page" and r.get("step") in ("burst", "failed")
            ]

        done = harness.wait_until(lambda: len(bursts()) >= tabs, timeout=120)
        assert done, f"{len(bursts())} of {tabs} tabs reported\n{world.diagnostics()}"
    finally:
        e2e.core.faults = before
    reports = bursts()
    assert [r for r in reports if r["step"] == "failed"] == []
    assert sorted(r["tab"] for r in reports) == list(range(tabs))
    responses = [response for r in reports for response in r["responses"]]
    assert len(responses) == tabs * burst
    refused = [r["error"] for r in responses if not r["ok"]]
    assert refused == [], refused[:3]
    assert len({r["requestId"] for r in responses}) == tabs * burst
    assert len(world.host_starts()) == 1, world.host_starts()
    reached = {r.request_id for r in world.core.requests("list_providers")}
    assert {r["requestId"] for r in responses} <= reached
