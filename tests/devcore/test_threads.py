"""Threads, origin binding, streams and the dev provider (spec 3.6 - 3.9, 9.8 items 4 - 5)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from native_host.devcore import DevCore
from tests.support.core_lines import (
    ORIGIN,
    ClientFactory,
    CoreFactory,
    LineClient,
    create_thread,
    subscribe,
)

pytestmark = pytest.mark.unit


def strip(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without `threadId` (asserted separately where it matters)."""
    return [{k: v for k, v in e.items() if k != "threadId"} for e in events]


def test_thread_ids_are_base36_counter(client: LineClient) -> None:
    ids = [create_thread(client) for _ in range(11)]
    assert ids[0] == "t000001"
    assert ids[9] == "t00000a"
    assert ids[10] == "t00000b"


def test_create_emits_created_and_idle_before_any_subscribe(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    client.result("end_thread", {"threadId": thread_id})
    first = stream.events(1)[0]
    assert first["seq"] == 3, "no replay of created (1) and status_changed idle (2)"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"name": "1bad", "description": "d", "argsSchema": {}}], "tool name must match"),
        ([{"name": "a b", "description": "d", "argsSchema": {}}], "tool name must match"),
        ([{"name": "ok", "description": "  ", "argsSchema": {}}], "description"),
        (
            [
                {"name": "dup", "description": "d", "argsSchema": {}},
                {"name": "dup", "description": "d", "argsSchema": {}},
            ],
            "unique",
        ),
        ([{"name": "ok", "description": "d", "argsSchema": 5}], "JSON Schema"),
        ([{"name": "ok", "description": "d", "argsSchema": {"type": "thing"}}], "JSON Schema"),
        ([{"name": "ok", "description": "d", "argsSchema": {}, "timeoutMs": 0}], "timeoutMs"),
    ],
)
def test_tools_manifest_invalid(client: LineClient, tools: list[Any], message: str) -> None:
    error = client.error(
        "create_thread", {"provider": "codex", "skills": {"guidance": "", "tools": tools}}
    )
    assert error["code"] == "TOOLS_MANIFEST_INVALID"
    assert message in error["message"]


def test_tool_names_allow_dots_dashes_underscores(client: LineClient) -> None:
    tool = {"name": "a.b-c_D9", "description": "d", "argsSchema": {"type": "object"}}
    create_thread(client, skills={"guidance": "", "tools": [tool]})


@pytest.mark.parametrize(
    "origin", ["https://app.example.com/path", "ftp://x.example", "https://u@x.example", "null", ""]
)
def test_create_with_invalid_origin(client: LineClient, origin: str) -> None:
    assert client.error("create_thread", {"provider": "codex"}, origin=origin) == {
        "code": "THREAD_ACCESS_DENIED",
        "message": "invalid caller origin",
    }


def test_origin_binding(core: DevCore, client: LineClient, connect: ClientFactory) -> None:
    thread_id = create_thread(client, origin="HTTPS://App.Example.com:443/")
    denied = {
        "code": "THREAD_ACCESS_DENIED",
        "message": "thread is not accessible to this caller",
        "details": {"threadId": thread_id},
    }
    payloads: dict[str, dict[str, Any]] = {
        "send_text": {"threadId": thread_id, "message": "hi"},
        "prepare_thread": {"threadId": thread_id},
        "submit_tool_result": {"threadId": thread_id, "requestId": "x", "result": 1},
        "subscribe_thread": {"threadId": thread_id},
        "create_asset_upload": {"threadId": thread_id, "filename": "a.txt", "sizeBytes": 1},
        "create_asset_download": {"threadId": thread_id, "path": "/a.txt"},
        "list_assets": {"threadId": thread_id},
        "end_thread": {"threadId": thread_id},
    }
    for kind, payload in payloads.items():
        for origin in (None, "https://other.example.com", "not an origin"):
            assert client.error(kind, payload, origin=origin) == denied, (kind, origin)
    # Core's own normalisation: equivalent spellings are the same owner.
    assert client.result(
        "list_assets", {"threadId": thread_id}, origin="https://APP.example.com"
    ) == {"assets": []}
    assert client.result("end_thread", {"threadId": thread_id}, origin=ORIGIN) == {}


def test_unowned_thread_open_to_every_caller(client: LineClient) -> None:
    thread_id = create_thread(client)
    for origin in (None, ORIGIN, "https://other.example.com", "garbage"):
        assert client.result("list_assets", {"threadId": thread_id}, origin=origin) == {
            "assets": []
        }


def test_legacy_send_text_sequence(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core("legacy")
    client = connect(core)
    thread_id = create_thread(client)
    stream, result = subscribe(core, connect, thread_id)
    assert result == {"subscribed": True}
    assert client.result(
        "send_text", {"threadId": thread_id, "message": "hello", "operationId": "op_x"}
    ) == {"threadId": thread_id}
    events = stream.events(4)
    assert all(e["threadId"] == thread_id for e in events)
    started = events[1]
    assert started["type"] == "provider_command_started"
    assert started["prompt"] == "hello"
    assert isinstance(started["processId"], int) and isinstance(started["args"], list)
    assert isinstance(started["program"], str) and isinstance(started["cwd"], str)
    assert strip([events[0], events[2], events[3]]) == [
        {"type": "status_changed", "seq": 3, "status": "running"},
        {"type": "assistant_message", "seq": 5, "text": "echo: hello"},
        {"type": "status_changed", "seq": 6, "status": "idle"},
    ]


def test_current_send_text_sequence(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core("current")
    client = connect(core)
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    result = client.result("send_text", {"threadId": thread_id, "message": "two words"})
    op = result["operationId"]
    assert result == {"threadId": thread_id, "operationId": op}
    assert op.startswith("op_")
    assert strip(stream.events(6)) == [
        {"type": "status_changed", "seq": 3, "status": "running", "operationId": op},
        {"type": "assistant_delta", "seq": 4, "text": "echo: two words", "operationId": op},
        {"type": "assistant_message", "seq": 5, "text": "echo: two words", "operationId": op},
        {"type": "usage_updated", "seq": 6, "totalTokens": 5},
        {"type": "status_changed", "seq": 7, "status": "idle", "operationId": op},
        {
            "type": "operation_completed",
            "seq": 8,
            "operationId": op,
            "operationKind": "user",
            "success": True,
        },
    ]
    second = client.result("send_text", {"threadId": thread_id, "message": "x", "operationId": ""})
    assert second["operationId"] not in ("", op)
    assert stream.events(6)[3]["totalTokens"] == 5 + 1 + 2


def test_several_subscribers_share_seq(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    first, _ = subscribe(core, connect, thread_id)
    second, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": "/stream 3 abc"})
    count = 4 + 3 if core.engine.current else 2 + 3 + 1
    a, b = first.events(count), second.events(count)
    assert a == b
    assert [e["seq"] for e in a] == list(range(3, 3 + count))


def test_late_subscriber_gets_no_replay(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    early, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": "a"})
    n = 6 if core.engine.current else 4
    early.events(n)
    late, _ = subscribe(core, connect, thread_id)
    client.result("end_thread", {"threadId": thread_id})
    assert late.events(1)[0]["seq"] == 3 + n


def test_stream_variants(make_core: CoreFactory, connect: ClientFactory, generation: str) -> None:
    core = make_core(generation)
    client = connect(core)
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": "/stream 4 abcdefgh"})
    if generation == "current":
        events = stream.events(1 + 4 + 4)
        deltas = [e["text"] for e in events if e["type"] == "assistant_delta"]
        assert len(deltas) == 4 and "".join(deltas) == "echo: abcdefgh"
        assert events[5]["type"] == "assistant_message" and events[5]["text"] == "echo: abcdefgh"
    else:
        events = stream.events(2 + 4 + 1)
        messages = [e["text"] for e in events if e["type"] == "assistant_message"]
        assert len(messages) == 4 and "".join(messages) == "echo: abcdefgh"
        assert events[-1]["status"] == "idle"


def test_sleep_delays_reply_and_keeps_thread_busy(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    started = time.monotonic()
    client.result("send_text", {"threadId": thread_id, "message": "/sleep 300 zzz"})
    assert time.monotonic() - started < 0.25, "send_text answers before the turn's output"
    assert client.error("send_text", {"threadId": thread_id, "message": "again"}) == {
        "code": "THREAD_BUSY",
        "message": "thread is already running",
        "details": {"threadId": thread_id},
    }
    assert client.error("prepare_thread", {"threadId": thread_id})["code"] == "THREAD_BUSY"
    texts = []
    while not texts:
        event = stream.events(1)[0]
        if event["type"] == "assistant_message":
            texts.append(event["text"])
    assert texts == ["echo: zzz"]
    assert time.monotonic() - started >= 0.3


def test_fail_sets_error_state(
    make_core: CoreFactory, connect: ClientFactory, generation: str
) -> None:
    core = make_core(generation)
    client = connect(core)
    thread_id = create_thread(client, provider="claude")
    stream, _ = subscribe(core, connect, thread_id)
    op = client.result("send_text", {"threadId": thread_id, "message": "/fail"}).get("operationId")
    error = {
        "code": "PROVIDER_COMMAND_FAILED",
        "message": "provider command failed",
        "details": {"threadId": thread_id, "processId": os.getpid(), "exitCode": 1},
    }
    if generation == "current":
        events = strip(stream.events(4))
        assert events[1:] == [
            {
                "type": "error",
                "seq": 4,
                "source": "provider",
                "provider": "claude",
                "error": error,
                "operationId": op,
            },
            {"type": "status_changed", "seq": 5, "status": "error", "operationId": op},
            {
                "type": "operation_completed",
                "seq": 6,
                "operationId": op,
                "operationKind": "user",
                "success": False,
                "error": error,
            },
        ]
    else:
        events = strip(stream.events(4))
        assert events[2:] == [
            {"type": "status_changed", "seq": 5, "status": "error"},
            {"type": "error", "seq": 6, "source": "provider", "provider": "claude", "error": error},
        ]
    assert client.error("send_text", {"threadId": thread_id, "message": "x"}) == {
        "code": "PROVIDER_COMMAND_FAILED",
        "message": "thread is in error state",
        "details": {"threadId": thread_id},
    }
    result = client.result("prepare_thread", {"threadId": thread_id})
    assert result["prepared"] is True
    assert core.thread(thread_id).status == "idle"  # type: ignore[union-attr]


def test_prepare(make_core: CoreFactory, connect: ClientFactory, generation: str) -> None:
    core = make_core(generation)
    client = connect(core)
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    first = client.result("prepare_thread", {"threadId": thread_id, "operationId": "op_prep"})
    again = client.result("prepare_thread", {"threadId": thread_id})
    assert first["alreadyPrepared"] is False and again["alreadyPrepared"] is True
    assert first["prepared"] is True and first["threadId"] == thread_id
    if generation == "current":
        assert first["operationId"] == "op_prep"
        events = strip(stream.events(5))
        assert [e["type"] for e in events] == [
            "status_changed",
            "provider_session_id_updated",
            "status_changed",
            "operation_completed",
            "operation_completed",
        ]
        assert all(e["operationId"] == "op_prep" for e in events[:4])
        assert events[3]["operationKind"] == "prepare" and events[3]["success"] is True
        assert events[4]["operationId"] == again["operationId"]
    else:
        assert "operationId" not in first
        events = strip(stream.events(3))
        assert [e["type"] for e in events] == [
            "status_changed",
            "provider_session_id_updated",
            "status_changed",
        ]


def test_model_required_for_ollama(client: LineClient) -> None:
    thread_id = create_thread(client, provider="ollama")
    for kind in ("send_text", "prepare_thread"):
        error = client.error(kind, {"threadId": thread_id, "message": "x"})
        assert error["code"] == "MODEL_REQUIRED"
    with_model = create_thread(client, provider="ollama", model="llama3")
    client.result("send_text", {"threadId": with_model, "message": "x"})


def test_end_thread_any_status_and_repeat(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    assert client.result("end_thread", {"threadId": thread_id}) == {}
    assert strip(stream.events(3)) == [
        {"type": "status_changed", "seq": 3, "status": "stopping"},
        {"type": "status_changed", "seq": 4, "status": "ended"},
        {"type": "ended", "seq": 5},
    ]
    assert client.result("end_thread", {"threadId": thread_id}) == {}
    assert strip(stream.events(2)) == [
        {"type": "status_changed", "seq": 6, "status": "ended"},
        {"type": "ended", "seq": 7},
    ]
    ended = {
        "code": "THREAD_ENDED",
        "message": "thread has ended",
        "details": {"threadId": thread_id},
    }
    assert client.error("send_text", {"threadId": thread_id, "message": "x"}) == ended
    assert client.error("prepare_thread", {"threadId": thread_id}) == ended
    assert client.error("list_assets", {"threadId": thread_id}) == ended
    _, ended_sub = subscribe(core, connect, thread_id)
    assert ended_sub["subscribed"] is True, "ended threads stay subscribable"
    assert client.error("end_thread", {"threadId": "t0000zz"})["code"] == "THREAD_NOT_FOUND"


def test_end_during_turn_stops_it(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": "/sleep 200 late"})
    client.result("end_thread", {"threadId": thread_id})
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["type"] != "ended":
        seen.extend(stream.events(1))
    time.sleep(0.3)
    client.result("end_thread", {"threadId": thread_id})
    follow = stream.events(1)[0]
    assert follow["type"] == "status_changed" and follow["status"] == "ended"
    assert not any(e["type"] == "assistant_message" for e in seen)


def run_tool_turn(
    core: DevCore, client: LineClient, connect: ClientFactory, message: str
) -> tuple[str, LineClient, list[dict[str, Any]]]:
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": message})
    events = stream.events(3 if core.engine.current else 4)
    return thread_id, stream, events


def test_tool_round_trip(core: DevCore, client: LineClient, connect: ClientFactory) -> None:
    thread_id, stream, events = run_tool_turn(
        core, client, connect, '/tool update_counter {"delta": 2}'
    )
    call = events[-1]
    assert events[-2]["status"] == "waitingToolResult"
    assert call["type"] == "tool_call" and call["toolName"] == "update_counter"
    assert call["args"] == {"delta": 2}
    assert call["requestId"].startswith("toolreq_")
    _, ms, n = call["requestId"].split("_")
    assert ms.isdigit() and n.isdigit()
    if core.engine.current:
        snap = client.result("thread_snapshot", {"threadId": thread_id})
        assert snap["status"] == "waitingToolResult"
        assert snap["pendingToolRequest"]["requestId"] == call["requestId"]
        assert snap["pendingToolRequest"]["timeoutMs"] == 60000
    payload = {"threadId": thread_id, "requestId": call["requestId"], "result": {"counter": 2}}
    assert client.result("submit_tool_result", payload) == {}
    after = stream.events(3)
    assert after[0]["status"] == "running"
    assert after[1]["type"] == "tool_result" and after[1]["result"] == {"counter": 2}
    assert after[1]["requestId"] == call["requestId"] and after[1]["toolName"] == "update_counter"
    if core.engine.current:
        assert after[2]["type"] == "assistant_delta"
    reply = after[2]["text"]
    assert reply == 'echo: tool update_counter returned {"counter":2}'
    error = client.error("submit_tool_result", payload)
    assert error == {
        "code": "PENDING_TOOL_REQUEST_NOT_FOUND",
        "message": "pending tool request was not found",
        "details": {"threadId": thread_id, "requestId": call["requestId"]},
    }


def test_submit_to_wrong_thread(core: DevCore, client: LineClient, connect: ClientFactory) -> None:
    _, _, events = run_tool_turn(core, client, connect, '/tool update_counter {"delta": 1}')
    other = create_thread(client)
    error = client.error(
        "submit_tool_result", {"threadId": other, "requestId": events[-1]["requestId"], "result": 1}
    )
    assert error["code"] == "PENDING_TOOL_REQUEST_NOT_FOUND"
    assert error["message"] == "pending tool request does not belong to thread"


def test_tool_timeout(core: DevCore, client: LineClient, connect: ClientFactory) -> None:
    thread_id = create_thread(
        client,
        skills={
            "guidance": "",
            "tools": [{"name": "slow", "description": "d", "argsSchema": {}, "timeoutMs": 150}],
        },
    )
    stream, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": "/tool slow {}"})
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] != "tool_call":
        events.extend(stream.events(1))
    request_id = events[-1]["requestId"]
    after = stream.events(2)
    assert after[0]["status"] == "running"
    texts = [e["text"] for e in after if e["type"] in ("assistant_message", "assistant_delta")]
    assert texts == ["echo: tool slow failed: TOOL_TIMEOUT"]
    late = client.error(
        "submit_tool_result", {"threadId": thread_id, "requestId": request_id, "result": 1}
    )
    assert late["code"] == "PENDING_TOOL_REQUEST_NOT_FOUND"


def test_timeout_override_from_args(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    _, stream, events = run_tool_turn(
        core, client, connect, '/tool update_counter {"delta": 1, "timeoutMs": 100}'
    )
    assert events[-1]["args"] == {"delta": 1}, "timeoutMs is stripped unless declared"
    assert stream.events(2)[1]["text"] == "echo: tool update_counter failed: TOOL_TIMEOUT"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("/tool missing {}", "TOOL_NOT_FOUND"),
        ('/tool update_counter {"delta": "x"}', "TOOL_ARGS_INVALID"),
        ("/tool update_counter {}", "TOOL_ARGS_INVALID"),
        ("/tool update_counter [1]", "TOOL_ARGS_INVALID"),
    ],
)
def test_tool_failures_become_replies(
    core: DevCore, client: LineClient, connect: ClientFactory, message: str, code: str
) -> None:
    thread_id = create_thread(client)
    stream, _ = subscribe(core, connect, thread_id)
    client.result("send_text", {"threadId": thread_id, "message": message})
    events = stream.events(3)
    texts = [e.get("text") for e in events]
    assert f"echo: tool {message.split()[1]} failed: {code}" in texts


def test_cli_tool_call_and_tool_spec(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client, origin=ORIGIN)
    assert client.result("tool_spec", {"threadId": thread_id, "toolName": "update_counter"}) == {
        "name": "update_counter",
        "description": "Add delta to the counter.",
        "argsSchema": {
            "type": "object",
            "properties": {"delta": {"type": "integer"}},
            "required": ["delta"],
        },
        "timeoutMs": 60000,
    }
    assert (
        client.error("tool_spec", {"threadId": thread_id, "toolName": "x"})["code"]
        == "TOOL_NOT_FOUND"
    )
    busy = client.error(
        "tool_call", {"threadId": thread_id, "toolName": "update_counter", "args": {"delta": 1}}
    )
    assert busy == {
        "code": "THREAD_BUSY",
        "message": "thread is not running",
        "details": {"threadId": thread_id},
    }
    stream, _ = subscribe(core, connect, thread_id, ORIGIN)
    client.result("send_text", {"threadId": thread_id, "message": "/sleep 2000"}, origin=ORIGIN)
    cli = connect(core)
    answer: dict[str, Any] = {}
    caller = threading.Thread(
        target=lambda: answer.update(
            cli.request(
                "tool_call",
                {"threadId": thread_id, "toolName": "update_counter", "args": {"delta": 5}},
            )
        )
    )
    caller.start()
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] != "tool_call":
        events.extend(stream.events(1))
    second = connect(core).error(
        "tool_call", {"threadId": thread_id, "toolName": "update_counter", "args": {"delta": 1}}
    )
    assert second["code"] == "PENDING_TOOL_REQUEST_EXISTS"
    client.result(
        "submit_tool_result",
        {"threadId": thread_id, "requestId": events[-1]["requestId"], "result": [1, 2]},
        origin=ORIGIN,
    )
    caller.join(5)
    assert answer["ok"] is True and answer["result"] == [1, 2]
    client.result("end_thread", {"threadId": thread_id}, origin=ORIGIN)
    ended = client.error(
        "tool_call", {"threadId": thread_id, "toolName": "update_counter", "args": {}}
    )
    assert ended["code"] == "THREAD_ENDED"
    assert (
        client.error("tool_spec", {"threadId": "nope", "toolName": "x"})["code"]
        == "THREAD_NOT_FOUND"
    )


def test_end_closes_pending_cli_tool_call(
    core: DevCore, client: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(client)
    client.result("send_text", {"threadId": thread_id, "message": "/sleep 2000"})
    cli = connect(core)
    payload = {"threadId": thread_id, "toolName": "update_counter", "args": {"delta": 1}}
    cli.send({"requestId": "c", "type": "tool_call", "payload": payload})
    thread = core.thread(thread_id)
    assert thread is not None
    assert core.wait_for(lambda c: thread.pending is not None)
    assert thread.pending is not None
    request_id = thread.pending.request_id
    client.result("end_thread", {"threadId": thread_id})
    assert cli.read()["error"] == {
        "code": "TOOL_TIMEOUT",
        "message": "tool result channel closed",
        "details": {"threadId": thread_id, "requestId": request_id},
    }
