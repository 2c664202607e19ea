"""Scenario tests of section 7 through the real host process and the dev Core.

The golden exchanges (test_golden.py) pin exact frames; these cover the behaviour around
them: concurrency under load, lifetime, subscriptions under races, privacy of logs.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any

import pytest

from tests.support.host import host_command
from tests.support.runtime import write_runtime
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

APP = "https://app.example.com"


def create_and_subscribe(host: Any, origin: str | None = APP, rid: str = "c") -> str:
    create: dict[str, Any] = {"type": "create_thread", "requestId": rid, "provider": "codex"}
    if origin:
        create["callerOrigin"] = origin
    created = host.request(create)
    assert created["ok"], created
    thread_id: str = created["result"]["threadId"]
    subscribe: dict[str, Any] = {
        "type": "subscribe_thread",
        "requestId": rid + "_sub",
        "threadId": thread_id,
    }
    if origin:
        subscribe["callerOrigin"] = origin
    assert host.request(subscribe)["ok"]
    return thread_id


def test_forty_slow_requests_run_concurrently(world: HostWorld) -> None:
    """All 40 are at the Core at once (held at its gate) and a ping still gets through."""
    core = world.start_core(
        "legacy",
        gate_types={"send_text"},
        canned_responses={"send_text": {"ok": True, "result": {"threadId": "t000001"}}},
    )
    host = world.start_host()
    for i in range(40):
        host.send({"type": "send_text", "requestId": f"r{i}", "threadId": "t1", "message": "x"})
    host.send({"type": "ping", "requestId": "fast"})
    first = host.read(timeout=60)
    assert first["requestId"] == "fast"
    assert core.wait_for(lambda c: c.gated == 40, timeout=120), f"{core.gated} held at once"
    core.open_gate()
    ids = {host.read(timeout=60)["requestId"] for _ in range(40)}
    assert ids == {f"r{i}" for i in range(40)}


def test_eof_with_a_call_in_flight_exits_promptly_and_closes_the_core_connection(
    world: HostWorld, wait_until: Any
) -> None:
    core = world.start_core("legacy", hang_types={"send_text"})
    host = world.start_host()
    host.send({"type": "send_text", "requestId": "hang", "threadId": "t1", "message": "x"})
    assert wait_until(lambda: len(core.requests("send_text")) == 1)
    started = time.monotonic()
    host.close_stdin()
    assert host.wait(3) == 0
    assert time.monotonic() - started < 2.0
    assert wait_until(lambda: core.eof_connections >= 1)
    assert host.no_frame_within(0.1)


def test_eof_with_live_streams_closes_them_silently(world: HostWorld, wait_until: Any) -> None:
    core = world.start_core("current")
    host = world.start_host()
    create_and_subscribe(host)
    host.close_stdin()
    assert host.wait(3) == 0
    assert wait_until(lambda: core.stream_eofs() == 1)


def test_closed_stdout_makes_the_host_exit(world: HostWorld) -> None:
    """The browser side of stdout goes away: the next write fails and the host exits 0."""
    import struct
    import subprocess

    world.start_core("legacy")
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [*host_command(), "chrome-extension://ogccgaminlphbkeghldidiiimajfdpag/"],
        stdin=subprocess.PIPE,
        stdout=write_end,
        stderr=subprocess.DEVNULL,
        env=world.env,
    )
    os.close(write_end)
    os.close(read_end)
    assert proc.stdin is not None
    body = b'{"type":"ping","requestId":"p"}'
    proc.stdin.write(struct.pack("<I", len(body)) + body)
    proc.stdin.flush()
    try:
        assert proc.wait(5) == 0
    finally:
        proc.kill()
        proc.stdin.close()


def test_core_request_line_over_the_limit_is_refused_before_connecting(world: HostWorld) -> None:
    core = world.start_core("legacy")
    host = world.start_host()
    prefix = '{"type":"send_text","requestId":"big","threadId":"t1","message":"'
    body = prefix + "x" * (1_048_576 - len(prefix) - 2) + '"}'
    assert len(body.encode()) == 1_048_576
    host.send_body(body.encode())
    reply = host.response("big")
    assert reply["error"]["code"] == "MESSAGE_TOO_LARGE"
    assert reply["error"]["message"] == "Core IPC request exceeds size limit"
    assert reply["error"]["details"]["stage"] == "send_request"
    assert reply["error"]["details"]["sizeBytes"] > 1_048_576
    assert core.connection_count == 0


def test_core_dying_mid_stream_reaches_the_page_once(world: HostWorld) -> None:
    core = world.start_core("current")
    host = world.start_host()
    thread_id = create_and_subscribe(host)
    core.crash()
    closed = host.read(timeout=5)
    assert closed["type"] == "thread_subscription_closed"
    assert closed["threadId"] == thread_id
    assert closed["error"]["code"] == "NATIVE_CONNECTION_CLOSED"
    assert host.no_frame_within(0.3)


def test_subscribe_refused_by_the_core_leaves_no_key_behind(world: HostWorld) -> None:
    core = world.start_core("legacy")
    host = world.start_host()
    first = host.request({"type": "subscribe_thread", "requestId": "s1", "threadId": "t0000zz"})
    assert first["error"]["code"] == "THREAD_NOT_FOUND"
    before = core.connection_count
    again = host.request({"type": "subscribe_thread", "requestId": "s2", "threadId": "t0000zz"})
    assert again["error"]["code"] == "THREAD_NOT_FOUND"
    assert core.connection_count == before + 1


def test_concurrent_subscribes_share_one_stream(world: HostWorld) -> None:
    core = world.start_core("legacy", delay_ms={"subscribe_thread": 300})
    host = world.start_host()
    created = host.request({"type": "create_thread", "requestId": "c", "provider": "codex"})
    thread_id = created["result"]["threadId"]
    for i in range(5):
        host.send({"type": "subscribe_thread", "requestId": f"s{i}", "threadId": thread_id})
    replies = [host.read(timeout=5) for _ in range(5)]
    results = sorted(json.dumps(r["result"], sort_keys=True) for r in replies)
    assert results.count('{"subscribed": true}') == 1
    assert results.count('{"duplicate": true, "subscribed": true}') == 4
    assert len(core.requests("subscribe_thread")) == 1


def test_equivalent_origins_share_one_stream(world: HostWorld) -> None:
    core = world.start_core("legacy")
    host = world.start_host()
    thread_id = create_and_subscribe(host)
    again = host.request(
        {
            "type": "subscribe_thread",
            "requestId": "s2",
            "threadId": thread_id,
            "callerOrigin": "HTTPS://APP.EXAMPLE.COM:443",
        }
    )
    assert again["result"] == {"subscribed": True, "duplicate": True}
    assert len(core.requests("subscribe_thread")) == 1


def test_current_duplicate_of_a_pending_key_waits_then_gets_a_snapshot(world: HostWorld) -> None:
    core = world.start_core("current", delay_ms={"subscribe_thread": 300})
    host = world.start_host()
    created = host.request(
        {"type": "create_thread", "requestId": "c", "provider": "codex", "callerOrigin": APP}
    )
    thread_id = created["result"]["threadId"]
    for rid in ("s1", "s2"):
        host.send(
            {
                "type": "subscribe_thread",
                "requestId": rid,
                "threadId": thread_id,
                "callerOrigin": APP,
            }
        )
    replies = {r["requestId"]: r for r in (host.read(timeout=5), host.read(timeout=5))}
    assert "duplicate" not in replies["s1"]["result"]
    assert replies["s2"]["result"]["duplicate"] is True
    assert replies["s2"]["result"]["snapshot"]["threadId"] == thread_id
    assert len(core.requests("subscribe_thread")) == 1
    assert len(core.requests("thread_snapshot")) == 1


def test_tool_round_trip_through_the_dev_provider(world: HostWorld) -> None:
    world.start_core("current")
    host = world.start_host()
    skills = {
        "guidance": "Count.",
        "tools": [
            {
                "name": "update_counter",
                "description": "Add delta to the counter",
                "argsSchema": {"type": "object", "properties": {"delta": {"type": "integer"}}},
            }
        ],
    }
    created = host.request(
        {
            "type": "create_thread",
            "requestId": "c",
            "provider": "codex",
            "skills": skills,
            "callerOrigin": APP,
        }
    )
    thread_id = created["result"]["threadId"]
    host.request(
        {"type": "subscribe_thread", "requestId": "s", "threadId": thread_id, "callerOrigin": APP}
    )
    host.send(
        {
            "type": "send_text",
            "requestId": "t",
            "threadId": thread_id,
            "message": '/tool update_counter {"delta":2}',
            "callerOrigin": APP,
        }
    )
    call, _ = host.read_until(
        lambda m: m.get("type") == "thread_event" and m["event"]["type"] == "tool_call"
    )
    assert call["event"]["toolName"] == "update_counter"
    assert call["event"]["args"] == {"delta": 2}
    submitted = host.request(
        {
            "type": "submit_tool_result",
            "requestId": "sub",
            "threadId": thread_id,
            "toolRequestId": call["event"]["requestId"],
            "result": {"counter": 2},
            "callerOrigin": APP,
        }
    )
    assert submitted == {"type": "response", "requestId": "sub", "ok": True, "result": {}}
    done, seen = host.read_until(
        lambda m: m.get("type") == "thread_event" and m["event"]["type"] == "operation_completed"
    )
    kinds = [m["event"]["type"] for m in seen if m.get("type") == "thread_event"]
    assert "tool_result" in kinds
    assert done["event"]["success"] is True
    seqs = [m["event"]["seq"] for m in seen if m.get("type") == "thread_event"]
    assert seqs == sorted(seqs)


def test_logs_hold_metadata_but_never_bodies(world: HostWorld) -> None:
    world.start_core("current")
    host = world.start_host()
    thread_id = create_and_subscribe(host)
    host.request(
        {
            "type": "send_text",
            "requestId": "secret_turn",
            "threadId": thread_id,
            "message": "my very private prompt",
            "callerOrigin": APP,
        }
    )
    host.read_until(
        lambda m: m.get("type") == "thread_event" and m["event"]["type"] == "operation_completed"
    )
    upload = host.request(
        {
            "type": "create_asset_upload",
            "requestId": "up",
            "threadId": thread_id,
            "filename": "confidential-plan.txt",
            "sizeBytes": 3,
            "callerOrigin": APP,
        }
    )
    host.stop()
    log = world.log_text()
    assert "secret_turn" in log and "send_text" in log
    assert "private prompt" not in log
    assert "confidential-plan" not in log
    if upload["ok"]:
        assert upload["result"]["token"] not in log


def test_trace_level_logs_bodies_with_secrets_redacted(world: HostWorld) -> None:
    world.start_core("current")
    host = world.start_host(PEDELEC_NATIVE_HOST_LOG="trace")
    thread_id = create_and_subscribe(host)
    upload = host.request(
        {
            "type": "create_asset_upload",
            "requestId": "up",
            "threadId": thread_id,
            "filename": "plan.txt",
            "sizeBytes": 3,
            "callerOrigin": APP,
        }
    )
    assert upload["ok"], upload
    host.stop()
    log = world.log_text()
    assert "plan.txt" in log
    assert upload["result"]["token"] not in log
    assert upload["result"]["uploadUrl"] not in log


def test_error_echoing_a_huge_field_still_fits_a_frame(world: HostWorld) -> None:
    """An answer that would echo nearly 1 MiB back is replaced, never sent oversize (the
    test's host reader refuses any frame over 1 MiB, so the ping read after them fails if
    one was)."""
    world.start_core("legacy")
    host = world.start_host()
    host.send({"type": "t" * 1_048_500, "requestId": "r"})
    reply = host.read()
    assert reply["requestId"] == "r"
    assert reply["error"]["code"] == "MESSAGE_TOO_LARGE"
    assert reply["error"]["details"]["stage"] == "relay_response"
    host.send({"type": "nope", "requestId": "i" * 1_048_500})
    reply = host.read()
    assert reply["requestId"] == ""
    assert reply["error"]["code"] == "MESSAGE_TOO_LARGE"
    assert host.request({"type": "ping", "requestId": "after"})["ok"]


def test_waiting_duplicate_is_answered_after_the_first_subscribe(world: HostWorld) -> None:
    """A duplicate that waited on a pending key never overtakes the answer it waited for."""
    world.start_core("legacy", delay_ms={"subscribe_thread": 300})
    host = world.start_host()
    thread_id = host.request({"type": "create_thread", "requestId": "c", "provider": "codex"})[
        "result"
    ]["threadId"]
    for rid in ("first", "second"):
        host.send({"type": "subscribe_thread", "requestId": rid, "threadId": thread_id})
    assert [host.read()["requestId"], host.read()["requestId"]] == ["first", "second"]


def test_deeply_nested_json_is_invalid_json_not_a_crash(world: HostWorld) -> None:
    world.start_core("legacy")
    host = world.start_host()
    host.send_body(b"[" * 200_000 + b"]" * 200_000)
    reply = host.read()
    assert reply["error"]["message"] == "native message was not valid JSON"
    assert reply["error"]["details"]["stage"] == "parse_message"
    assert host.request({"type": "ping", "requestId": "after"})["ok"]


def test_deeply_nested_stream_line_is_reported_and_the_legacy_stream_goes_on(
    world: HostWorld,
) -> None:
    core = world.start_core(
        "legacy",
        canned_responses={"subscribe_thread": {"ok": True, "result": {"subscribed": True}}},
    )
    host = world.start_host()
    host.request({"type": "subscribe_thread", "requestId": "s", "threadId": "t1"})
    core.inject_stream_line("t1", b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    error = host.read()
    assert error["event"]["error"]["message"] == "Core IPC message exceeds nesting limit"
    assert error["event"]["error"]["details"] == {"stage": "relay_event", "limitDepth": 199}
    event = {"type": "status_changed", "seq": 3, "threadId": "t1", "status": "idle"}
    core.inject_stream_line("t1", json.dumps({"type": "thread_event", "event": event}).encode())
    assert host.read() == {"type": "thread_event", "event": event}


def test_late_ended_on_a_current_stream_keeps_it_open(world: HostWorld, wait_until: Any) -> None:
    """Spec 9.9 C6 variant: a duplicate subscribe relayed a snapshot that already covers
    `ended`; when that `ended` arrives late the stream must stay open for the resume."""
    core = world.start_core("current", gate_stream_events=True)  # events wait for the test
    host = world.start_host()
    thread_id = create_and_subscribe(host)
    ended = host.request(
        {"type": "end_thread", "requestId": "e", "threadId": thread_id, "callerOrigin": APP}
    )
    assert ended["ok"]
    duplicate = host.request(
        {"type": "subscribe_thread", "requestId": "d", "threadId": thread_id, "callerOrigin": APP}
    )
    snapshot = duplicate["result"]["snapshot"]
    assert duplicate["result"]["duplicate"] is True and snapshot["status"] == "ended"
    core.open_gate()  # now the `ended` the snapshot covers arrives, late
    late, _ = host.read_until(lambda m: m.get("event", {}).get("type") == "ended")
    assert late["event"]["seq"] <= snapshot["latestSeq"]
    assert host.no_frame_within(0.2)
    assert core.stream_eofs(thread_id) == 0
    resumed = host.request(
        {"type": "resume_thread", "requestId": "r", "threadId": thread_id, "callerOrigin": APP}
    )
    assert resumed["result"]["snapshot"]["status"] == "idle"
    idle, _ = host.read_until(
        lambda m: (
            m.get("event", {}).get("type") == "status_changed" and m["event"]["status"] == "idle"
        )
    )
    assert idle["event"]["seq"] == snapshot["latestSeq"] + 1
    assert len(core.requests("subscribe_thread")) == 1


def test_ended_closes_a_current_stream_when_no_snapshot_covers_it(
    world: HostWorld, wait_until: Any
) -> None:
    core = world.start_core("current")
    host = world.start_host()
    thread_id = create_and_subscribe(host)
    host.send({"type": "end_thread", "requestId": "e", "threadId": thread_id, "callerOrigin": APP})
    host.read_until(lambda m: m.get("event", {}).get("type") == "ended")
    assert wait_until(lambda: core.stream_eofs(thread_id) == 1)


class ScriptedCore:
    """A one-connection Core that answers a subscribe with scripted lines, for races the
    dev Core does not produce (many events before the response)."""

    def __init__(self, world: HostWorld, lines: list[bytes]) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.lines = lines
        self.closed = threading.Event()
        write_runtime(world.home, self.server.getsockname()[1], os.getpid())
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.makefile("rb").readline()
            conn.sendall(b"".join(line + b"\n" for line in self.lines))
            while conn.recv(65536):
                pass
        self.closed.set()


def _event_line(seq: int, kind: str = "status_changed") -> bytes:
    event: dict[str, Any] = {"type": kind, "seq": seq, "threadId": "t1"}
    if kind == "status_changed":
        event["status"] = "running"
    return json.dumps({"type": "thread_event", "event": event}).encode()


def test_events_before_the_response_are_relayed_after_it_and_ended_closes(
    world: HostWorld,
) -> None:
    response = b'{"requestId":"s","ok":true,"result":{"subscribed":true}}'
    core = ScriptedCore(world, [_event_line(3), _event_line(4, "ended"), response])
    host = world.start_host()
    host.send({"type": "subscribe_thread", "requestId": "s", "threadId": "t1"})
    assert host.read()["result"] == {"subscribed": True}
    assert host.read()["event"]["seq"] == 3
    assert host.read()["event"]["type"] == "ended"
    assert core.closed.wait(5), "the host did not close the stream after a buffered ended"
    assert host.no_frame_within(0.2)


def test_too_many_events_before_the_response_fail_the_setup(world: HostWorld) -> None:
    response = b'{"requestId":"s","ok":true,"result":{"subscribed":true}}'
    core = ScriptedCore(world, [_event_line(i) for i in range(1001)] + [response])
    host = world.start_host()
    reply = host.request({"type": "subscribe_thread", "requestId": "s", "threadId": "t1"})
    assert reply["error"] == {
        "code": "IPC_UNAVAILABLE",
        "message": "Core IPC subscribe response was not valid JSON",
        "details": {"stage": "subscribe", "error": "too many events before subscribe response"},
    }
    assert core.closed.wait(5)


def test_a_duplicate_whose_stream_dies_during_its_snapshot_reaches_the_core_once(
    world: HostWorld, wait_until: Any
) -> None:
    """Spec 7.5 over 9.3: once the duplicate's `thread_snapshot` was written, the host
    never sends a `subscribe_thread` for it too, even though its key died meanwhile."""
    core = world.start_core("current", gate_types={"thread_snapshot"})
    host = world.start_host()
    thread_id = create_and_subscribe(host)
    host.send(
        {"type": "subscribe_thread", "requestId": "dup", "threadId": thread_id, "callerOrigin": APP}
    )

    def sent_for_dup() -> list[str]:
        return [
            r.envelope["type"] for r in core.record if (r.envelope or {}).get("requestId") == "dup"
        ]

    assert wait_until(lambda: sent_for_dup() == ["thread_snapshot"] and core.gated == 1)
    core.close_streams(thread_id)
    closed, _ = host.read_until(lambda m: m.get("type") == "thread_subscription_closed")
    assert closed["threadId"] == thread_id
    core.open_gate()  # the snapshot is answered only after its stream died
    answer = host.response("dup", timeout=10)
    assert answer["ok"] is False
    assert answer["error"]["code"] == "CORE_RUNTIME_UNAVAILABLE"
    assert answer["error"]["details"]["stage"] == "subscribe"
    assert host.no_frame_within(1.0)
    assert sent_for_dup() == ["thread_snapshot"]
    again = host.request(
        {
            "type": "subscribe_thread",
            "requestId": "fresh",
            "threadId": thread_id,
            "callerOrigin": APP,
        }
    )
    assert again["ok"] and "duplicate" not in again["result"], again
