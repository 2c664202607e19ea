"""Fault injection and the stream-control helpers the host's tests rely on."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pydantic import ValidationError

from native_host.devcore import DevCore, Faults, OversizeEvent
from tests.support.core_lines import (
    ORIGIN,
    ClientFactory,
    CoreFactory,
    LineClient,
    create_thread,
    subscribe,
)

pytestmark = pytest.mark.unit


def test_faults_json_form_uses_camel_case() -> None:
    faults = Faults.model_validate_json(
        '{"delayMs":{"ping":5},"hangTypes":["send_text"],"oversizeEvent":{"type":"tool_result","sizeBytes":9}}'
    )
    assert faults.delay_ms == {"ping": 5}
    assert faults.hang_types == {"send_text"}
    assert faults.oversize_event == OversizeEvent(type="tool_result", size_bytes=9)
    with pytest.raises(ValidationError):
        Faults.model_validate({"delay_msx": {}})


def test_delay_per_type(make_core: CoreFactory, connect: ClientFactory) -> None:
    client = connect(make_core(faults=Faults(delay_ms={"ping": 300})))
    started = time.monotonic()
    client.result("get_settings")
    assert time.monotonic() - started < 0.2
    client.result("ping")
    assert time.monotonic() - started >= 0.3


def test_hang_reads_but_never_answers(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core(faults=Faults(hang_types={"send_text"}))
    client = connect(core)
    client.sock.settimeout(0.3)
    client.send({"requestId": "h", "type": "send_text", "payload": {}})
    client.send({"requestId": "p", "type": "ping"})
    assert core.wait_for(lambda c: len(c.requests("ping")) == 1)
    with pytest.raises(TimeoutError):
        client.read_raw()
    assert connect(core).result("ping")["connected"] is True
    client.close()
    assert core.wait_for(lambda c: c.eof_connections == 1)


def test_drop_closes_without_answer(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core(faults=Faults(drop_types={"create_thread"}))
    client = connect(core)
    client.send({"requestId": "c1", "type": "create_thread", "payload": {"provider": "codex"}})
    assert client.read_raw() is None
    assert [r.request_id for r in core.requests("create_thread")] == ["c1"]
    assert core.eof_connections == 0, "a Core-side close is not a client EOF"
    assert core.thread("t000001") is None


def test_exit_on_type_in_process_crashes(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core(faults=Faults(exit_on_type="ping"))
    bystander = connect(core)
    bystander.result("get_settings")
    client = connect(core)
    client.send({"requestId": "x", "type": "ping"})
    assert client.read_raw() is None
    assert bystander.read_raw() is None
    assert core.runtime_path.exists()


@pytest.mark.parametrize(
    ("kind", "size", "check"),
    [
        ("list_assets", 1_048_576, lambda r: set(r["assets"][0]["name"]) == {"x"}),
        ("list_assets", 1_048_577, lambda r: r["assets"][0]["path"] == "/big"),
        ("workspace_list_folders", 1_048_576, lambda r: set(r["paths"][0]) == {"x"}),
        ("workspace_run", 2_000_000, lambda r: r["exitCode"] == 0 and r["stderr"] == ""),
        ("get_settings", 5000, lambda r: set(r) == {"padding"}),
    ],
)
def test_oversize_response(
    make_core: CoreFactory, connect: ClientFactory, kind: str, size: int, check: Any
) -> None:
    client = connect(make_core(faults=Faults(oversize_response={kind: size})))
    client.send({"requestId": "req", "type": kind, "payload": {}})
    line = client.read_raw()
    assert line is not None and len(line) == size
    reply = json.loads(line)
    assert reply["requestId"] == "req" and reply["ok"] is True
    assert check(reply["result"])


def test_oversize_list_assets_matches_golden_layout(
    make_core: CoreFactory, connect: ClientFactory
) -> None:
    client = connect(
        make_core("legacy", faults=Faults(oversize_response={"list_assets": 1_048_576}))
    )
    client.send({"requestId": "req_big", "type": "list_assets", "payload": {"threadId": "t000001"}})
    expected = (
        b'{"requestId":"req_big","ok":true,"result":{"assets":[{"name":"'
        + b"x" * 1_048_466
        + b'","path":"/big","sizeBytes":1,"modifiedAt":0}]}}'
    )
    assert len(expected) == 1_048_576
    assert json.loads(client.read_raw() or b"") == json.loads(expected)


def test_canned_response(make_core: CoreFactory, connect: ClientFactory) -> None:
    error = {
        "code": "THREAD_BUSY",
        "message": "thread is already running",
        "details": {"threadId": "thread_busy"},
    }
    core = make_core(
        faults=Faults(
            canned_responses={
                "send_text": {"ok": False, "error": error},
                "ping": {
                    "requestId": "",
                    "ok": False,
                    "error": {"code": "IPC_UNAVAILABLE", "message": "x"},
                },
            }
        )
    )
    client = connect(core)
    assert client.request(
        "send_text", {"threadId": "thread_busy", "message": "hello"}, request_id="send_1"
    ) == {
        "requestId": "send_1",
        "ok": False,
        "error": error,
    }
    assert client.request("ping")["requestId"] == ""


def test_canned_subscribe_makes_a_stream_for_any_id(
    make_core: CoreFactory, connect: ClientFactory
) -> None:
    core = make_core(
        "legacy",
        faults=Faults(
            canned_responses={"subscribe_thread": {"ok": True, "result": {"subscribed": True}}}
        ),
    )
    stream = connect(core)
    reply = stream.request(
        "subscribe_thread", {"threadId": "thread_subscribe"}, request_id="req_subscribe"
    )
    assert reply == {"requestId": "req_subscribe", "ok": True, "result": {"subscribed": True}}
    event = core.emit_event("thread_subscribe", {"type": "raw_stdout", "text": "hello"})
    assert event == {
        "type": "raw_stdout",
        "seq": 1,
        "threadId": "thread_subscribe",
        "text": "hello",
    }
    core.inject_stream_line("thread_subscribe", b"not json")
    core.emit_event("thread_subscribe", {"type": "raw_stdout", "text": "again", "seq": 99})
    assert stream.read() == {"type": "thread_event", "event": event}
    assert stream.read_raw() == b"not json"
    assert stream.read()["event"]["seq"] == 2


def test_event_before_subscribe_response(
    make_core: CoreFactory, connect: ClientFactory, generation: str
) -> None:
    core = make_core(generation, faults=Faults(event_before_subscribe_response=True))
    client = connect(core)
    thread_id = create_thread(client)
    streams = [connect(core), connect(core)]
    for index, stream in enumerate(streams):
        stream.send(
            {
                "requestId": f"s{index}",
                "type": "subscribe_thread",
                "payload": {"threadId": thread_id},
            }
        )
        first = stream.read()
        assert first["type"] == "thread_event" and first["event"]["seq"] == 3 + index
        assert first["event"]["type"] == (
            "status_changed" if generation == "current" else "raw_stdout"
        )
        assert stream.read() == {
            "requestId": f"s{index}",
            "ok": True,
            "result": stream_result(core, index),
        }
    assert streams[0].events(1)[0]["seq"] == 4, "an early event reaches the other live streams"
    client.result("end_thread", {"threadId": thread_id})
    assert streams[1].events(1)[0]["seq"] == 5


def stream_result(core: DevCore, index: int) -> Any:
    """The subscribe result; its snapshot predates the early event (the race of spec 3.8)."""
    if not core.engine.current:
        return {"subscribed": True}
    snapshot = {
        "threadId": "t000001",
        "workspaceId": "ws_000001",
        "status": "idle",
        "latestSeq": 2 + index,
    }
    return {
        "subscribed": True,
        "snapshot": snapshot,
        "workspace": {"workspaceId": "ws_000001", "path": None},
    }


def test_garbage_and_oversize_event_after_subscribe(
    make_core: CoreFactory, connect: ClientFactory
) -> None:
    faults = Faults(
        garbage_line_after_subscribe="not json",
        oversize_event=OversizeEvent(type="assistant_message", size_bytes=2_000_000),
    )
    core = make_core(faults=faults)
    client = connect(core)
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    assert stream.read_raw() == b"not json"
    big = stream.read_raw()
    assert big is not None and len(big) == 2_000_000
    assert big.endswith(
        f'","threadId":"{thread_id}","type":"assistant_message"}},"type":"thread_event"}}'.encode()
    )
    assert json.loads(big)["event"]["seq"] == 3
    client.result("end_thread", {"threadId": thread_id})
    assert stream.events(1)[0]["seq"] == 4


@pytest.mark.parametrize("after", [0, 2])
def test_close_stream_after_events(
    make_core: CoreFactory, connect: ClientFactory, after: int
) -> None:
    core = make_core(faults=Faults(close_stream_after_events=after))
    client = connect(core)
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    client.result("end_thread", {"threadId": thread_id})
    assert len(stream.events(after)) == after
    assert stream.read_raw() is None
    assert core.stream_eofs() == 0


def test_thread_snapshot_unknown(make_core: CoreFactory, connect: ClientFactory) -> None:
    client = connect(make_core(faults=Faults(thread_snapshot_unknown=True)))
    thread_id = create_thread(client)
    assert client.error("thread_snapshot", {"threadId": thread_id}) == {
        "code": "IPC_UNAVAILABLE",
        "message": "unknown Core IPC request type",
        "details": {"type": "thread_snapshot"},
    }


def test_open_workspace_blocks_for_a_while(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core(faults=Faults(open_workspace_block_ms=400))
    picker = connect(core)
    started = time.monotonic()
    picker.send({"requestId": "o", "type": "open_workspace", "callerOrigin": ORIGIN, "payload": {}})
    assert connect(core).result("ping")["connected"] is True
    assert time.monotonic() - started < 0.3
    assert picker.read() == {"requestId": "o", "ok": True, "result": {"workspace": None}}
    assert time.monotonic() - started >= 0.4


def test_open_workspace_blocks_until_close(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core(faults=Faults(open_workspace_block_until_close=True))
    picker = connect(core)
    picker.send({"requestId": "o", "type": "open_workspace", "callerOrigin": ORIGIN, "payload": {}})
    assert core.wait_for(lambda c: len(c.requests("open_workspace")) == 1)
    picker.close()
    assert core.wait_for(lambda c: c.eof_connections == 1)


def test_hold_stream_events(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core(faults=Faults(hold_stream_events_ms=300))
    client = connect(core)
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    started = time.monotonic()
    client.result("end_thread", {"threadId": thread_id})
    snap = client.result("thread_snapshot", {"threadId": thread_id})
    assert snap["status"] == "ended" and snap["latestSeq"] == 5
    events = stream.events(3)
    assert time.monotonic() - started >= 0.3
    assert [e["seq"] for e in events] == [3, 4, 5]


def test_response_request_id(make_core: CoreFactory, connect: ClientFactory) -> None:
    faults = Faults(
        response_request_id="",
        oversize_response={"list_assets": 500},
        canned_responses={"get_settings": {"ok": True, "result": {}}},
    )
    client = connect(make_core(faults=faults))
    assert client.request("ping", request_id="req_x")["requestId"] == ""
    assert client.request("nope", request_id="req_y")["requestId"] == ""
    assert client.request("list_assets", {}, request_id="req_z")["requestId"] == ""
    assert client.request("get_settings", request_id="req_w")["requestId"] == ""


def test_close_streams_and_stream_eofs(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    first = create_thread(client)
    second = create_thread(client)
    a, _ = subscribe(core, connect, first)
    b, _ = subscribe(core, connect, second)
    c, _ = subscribe(core, connect, second)
    core.close_streams(first)
    assert a.read_raw() is None
    c.close()
    assert core.wait_for(lambda k: k.stream_eofs(second) == 1)
    assert core.stream_eofs(first) == 0 and core.stream_eofs() == 1
    core.close_streams()
    assert b.read_raw() is None
    assert core.stream_eofs() == 1
