"""The nesting limit through the real host (codec.MAX_DEPTH): a page frame, a Core
response or a Core event nested deeper than the browser reads is refused where it
enters, with an answer that says so; nothing at the limit is refused; nothing deeper is
ever written to the browser, and nothing reaches the "internal error" safety net."""

from __future__ import annotations

import json
from typing import Any

import pytest

from native_host.codec import MAX_DEPTH
from native_host.errors import MSG_INTERNAL
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

APP = "https://app.example.com"
OK_SEND = {"send_text": {"ok": True, "result": {"threadId": "t000001"}}}


def arrays(depth: int) -> bytes:
    """`depth` nested arrays as JSON text (json.dumps stops near 1,000 levels)."""
    return b"[" * depth + b"]" * depth


def send_text_body(request_id: str, extra_depth: int) -> bytes:
    """A send_text frame whose `extra` field nests `extra_depth` arrays (the frame is one
    level deeper), written as the extension does: payload fields, then type and requestId."""
    head = b'{"threadId": "t1", "message": "hi", "extra": ' + arrays(extra_depth)
    return head + b', "type": "send_text", "requestId": "%s"}' % request_id.encode()


def frame_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((frame_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((frame_depth(v) for v in value), default=0)
    return 0


def write_launch_marker_app(world: HostWorld) -> Any:
    """app-launch.json naming a program that only leaves a marker: a launch would show."""
    marker = world.root / "launched"
    app = world.root / "app"
    app.write_text(f"#!/bin/sh\ntouch {marker}\n")
    app.chmod(0o755)
    config = {"version": 1, "executablePath": str(app), "backgroundArgs": ["--background"]}
    (world.home / "app-launch.json").write_text(json.dumps(config))
    return marker


def test_a_page_frame_past_the_limit_is_refused_at_parse_under_its_own_id(
    world: HostWorld,
) -> None:
    """The reported case: `extra` nested 990 deep once passed the parser and failed in the
    encoder, answered "native host internal error" at relay_response."""
    core = world.start_core("legacy", canned_responses=OK_SEND)
    host = world.start_host()
    for request_id, depth in (("r990", 990), ("r_past", MAX_DEPTH)):
        host.send_body(send_text_body(request_id, depth))
        reply = host.read(timeout=30)
        assert reply["requestId"] == request_id
        assert reply["error"]["code"] == "IPC_UNAVAILABLE"
        assert reply["error"]["message"] == "native message was not valid JSON"
        details = reply["error"]["details"]
        assert details == {"stage": "parse_message", "error": details["error"]}
        assert f"deeper than {MAX_DEPTH}" in details["error"]
    assert core.requests("send_text") == []

    host.send_body(send_text_body("r_at", MAX_DEPTH - 1))  # the frame is MAX_DEPTH deep
    assert host.read(timeout=30) == {
        "type": "response",
        "requestId": "r_at",
        "ok": True,
        "result": {"threadId": "t000001"},
    }
    [sent] = core.requests("send_text")
    assert frame_depth(sent.envelope["payload"]["extra"]) == MAX_DEPTH - 1


def test_a_core_response_past_the_limit_is_refused_like_an_oversize_one(
    world: HostWorld,
) -> None:
    """Answered MESSAGE_TOO_LARGE at await_core_response: no retry, no launch; a response
    at the limit arrives whole."""
    core = world.start_core("legacy", deep_response={"list_assets": MAX_DEPTH + 1})
    marker = write_launch_marker_app(world)
    host = world.start_host()
    reply = host.request({"type": "list_assets", "requestId": "deep", "threadId": "t1"})
    assert reply["error"] == {
        "code": "MESSAGE_TOO_LARGE",
        "message": "Core IPC message exceeds nesting limit",
        "details": {"stage": "await_core_response", "limitDepth": MAX_DEPTH},
    }
    assert len(core.requests("list_assets")) == 1
    assert not marker.exists()

    core.faults = core.faults.model_copy(update={"deep_response": {"list_assets": MAX_DEPTH}})
    reply = host.request({"type": "list_assets", "requestId": "at", "threadId": "t1"})
    assert reply["ok"] is True
    assert frame_depth(reply) == MAX_DEPTH


def test_a_result_the_host_wraps_deeper_than_the_limit_is_replaced(world: HostWorld) -> None:
    """A duplicate subscribe puts the Core's snapshot one level down: at a Core line of
    MAX_DEPTH that frame would be too deep, so it becomes an error, never written."""
    world.start_core("current")
    host = world.start_host()
    created = host.request(
        {"type": "create_thread", "requestId": "c", "provider": "codex", "callerOrigin": APP}
    )
    thread_id = created["result"]["threadId"]
    subscribe = {"type": "subscribe_thread", "threadId": thread_id, "callerOrigin": APP}
    assert host.request({**subscribe, "requestId": "s1"})["ok"]
    core = world.cores[0]
    snapshot = {"latestSeq": 0, "deep": json.loads(arrays(MAX_DEPTH - 2))}  # line: MAX_DEPTH
    core.faults = core.faults.model_copy(
        update={"canned_responses": {"thread_snapshot": {"ok": True, "result": snapshot}}}
    )
    reply = host.request({**subscribe, "requestId": "s2"})
    assert reply["error"] == {
        "code": "MESSAGE_TOO_LARGE",
        "message": "response exceeds native message nesting limit",
        "details": {"stage": "relay_response", "limitDepth": MAX_DEPTH},
    }
    assert host.request({"type": "ping", "requestId": "after"})["ok"]


def test_stream_events_past_the_limit_are_dropped_or_reported_and_the_stream_goes_on(
    world: HostWorld,
) -> None:
    """Like an oversize line (spec 7.8) on a legacy stream: an informational event is
    dropped, any other becomes a synthetic error with its type and seq; then the next
    event arrives, and one at the limit arrives whole."""
    core = world.start_core("legacy")
    host = world.start_host()
    created = host.request({"type": "create_thread", "requestId": "c", "provider": "codex"})
    thread_id = created["result"]["threadId"]
    sub = {"type": "subscribe_thread", "requestId": "s", "threadId": thread_id}
    assert host.request(sub)["ok"]

    def line(kind: str, seq: int, depth: int) -> bytes:
        head = json.dumps({"type": "thread_event", "event": {"type": kind, "seq": seq}})
        nested = arrays(depth - 2)  # {"type":"thread_event","event":{..., "deep": here}}
        return head[:-2].encode() + b', "threadId": "%s", "deep": %s}}' % (
            thread_id.encode(),
            nested,
        )

    core.inject_stream_line(thread_id, line("raw_stdout", 101, MAX_DEPTH + 1))
    core.inject_stream_line(thread_id, line("assistant_message", 102, MAX_DEPTH + 1))
    core.inject_stream_line(thread_id, line("assistant_message", 103, MAX_DEPTH))
    reported = host.read(timeout=15)
    assert reported["event"]["type"] == "error"
    assert reported["event"]["error"] == {
        "code": "MESSAGE_TOO_LARGE",
        "message": "Core IPC message exceeds nesting limit",
        "details": {
            "stage": "relay_event",
            "eventType": "assistant_message",
            "seq": 102,
            "limitDepth": MAX_DEPTH,
        },
    }
    at_limit = host.read(timeout=15)
    assert at_limit["event"]["seq"] == 103
    assert frame_depth(at_limit) == MAX_DEPTH
    log = world.log_text()
    assert "raw_stdout" in log and MSG_INTERNAL not in log


def test_an_event_too_deep_in_its_own_type_or_seq_is_still_reported_and_the_stream_goes_on(
    world: HostWorld,
) -> None:
    """The error names the event by its `type` and `seq` only when they are a type name
    and a number: a `seq` that is the too-deep part, copied, made the error itself too
    deep for the browser; a `type` that is a list crashed the stream's reader."""
    core = world.start_core("legacy")
    host = world.start_host()
    created = host.request({"type": "create_thread", "requestId": "c", "provider": "codex"})
    thread_id = created["result"]["threadId"]
    assert host.request({"type": "subscribe_thread", "requestId": "s", "threadId": thread_id})["ok"]

    def line(kind: bytes, seq: bytes) -> bytes:
        event = b'{"type":%s,"seq":%s,"threadId":"%s","deep":%s}' % (
            kind,
            seq,
            thread_id.encode(),
            arrays(MAX_DEPTH),
        )
        return b'{"type":"thread_event","event":%s}' % event

    core.inject_stream_line(thread_id, line(b'"assistant_message"', arrays(MAX_DEPTH)))
    core.inject_stream_line(thread_id, line(b'["raw_stdout"]', b"5"))
    after = {"type": "assistant_message", "seq": 6, "threadId": thread_id, "text": "after"}
    core.inject_stream_line(
        thread_id, json.dumps({"type": "thread_event", "event": after}).encode()
    )
    limit = {"stage": "relay_event", "limitDepth": MAX_DEPTH}
    first = host.read(timeout=15)
    assert frame_depth(first) < MAX_DEPTH
    assert first["event"]["error"]["details"] == limit | {"eventType": "assistant_message"}
    assert host.read(timeout=15)["event"]["error"]["details"] == limit | {"seq": 5}
    assert host.read(timeout=15)["event"] == after
    log = world.log_text()
    assert "Traceback" not in log and "reader failed" not in log


def test_a_stream_line_too_deep_to_parse_is_named_by_its_ends(world: HostWorld) -> None:
    """100,000 levels cannot be parsed at all: as for an oversize line (spec 7.8) the event
    type is looked for at the line's end; an informational one is dropped."""
    core = world.start_core(
        "legacy",
        canned_responses={"subscribe_thread": {"ok": True, "result": {"subscribed": True}}},
    )
    host = world.start_host()
    host.request({"type": "subscribe_thread", "requestId": "s", "threadId": "t1"})

    def line(kind: str) -> bytes:
        deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
        return b'{"event":{"deep":%s,"type":"%s"},"type":"thread_event"}' % (deep, kind.encode())

    core.inject_stream_line("t1", line("raw_stderr"))
    core.inject_stream_line("t1", line("done"))
    error = host.read()["event"]["error"]
    assert error["message"] == "Core IPC message exceeds nesting limit"
    details = {"stage": "relay_event", "eventType": "done", "limitDepth": MAX_DEPTH}
    assert error["details"] == details
