"""The Core side of the golden exchanges of spec 8 (legacy) and 9.9 (current), exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from native_host.devcore import Faults
from tests.support.core_lines import COUNTER_TOOL, ClientFactory, CoreFactory, LineClient

pytestmark = pytest.mark.unit

APP = "https://app.example.com"


def line(client: LineClient, envelope: dict[str, object]) -> object:
    client.send(envelope)
    return client.read()


def test_section_8_legacy(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core("legacy")
    c = connect(core)
    # 1. create_thread, no origin
    assert line(
        c,
        {
            "requestId": "req_create",
            "type": "create_thread",
            "payload": {
                "provider": "codex",
                "model": "gpt-5",
                "skills": {"guidance": "Use tools.", "tools": [COUNTER_TOOL]},
            },
        },
    ) == {"requestId": "req_create", "ok": True, "result": {"threadId": "t000001"}}
    # 2. create_thread from an SDK page
    assert line(
        c,
        {
            "requestId": "ext_1700000000000_2",
            "type": "create_thread",
            "callerOrigin": APP,
            "payload": {"provider": "claude"},
        },
    ) == {"requestId": "ext_1700000000000_2", "ok": True, "result": {"threadId": "t000002"}}
    # 10. ping; 11. get_settings and list_providers
    assert line(c, {"requestId": "req_ping", "type": "ping", "payload": {}}) == {
        "requestId": "req_ping",
        "ok": True,
        "result": {"connected": True},
    }
    assert line(c, {"requestId": "req_get_settings", "type": "get_settings", "payload": {}}) == {
        "requestId": "req_get_settings",
        "ok": True,
        "result": {"defaultProvider": None, "defaultModels": {}},
    }
    providers = c.result("list_providers", {})
    assert len(providers) == 6 and set(providers[0]) == {"name", "code", "available", "error"}
    # 19. tool round trip on a live stream of t000001
    stream = connect(core)
    assert line(
        stream,
        {
            "requestId": "req_subscribe",
            "type": "subscribe_thread",
            "payload": {"threadId": "t000001"},
        },
    ) == {
        "requestId": "req_subscribe",
        "ok": True,
        "result": {"subscribed": True},
    }
    # 6. send_text
    assert line(
        c,
        {
            "requestId": "req_send",
            "type": "send_text",
            "payload": {"threadId": "t000001", "message": '/tool update_counter {"delta":2}'},
        },
    ) == {"requestId": "req_send", "ok": True, "result": {"threadId": "t000001"}}
    events = stream.events(4)
    assert events[2] == {
        "type": "status_changed",
        "seq": 5,
        "threadId": "t000001",
        "status": "waitingToolResult",
    }
    tool_request = events[3]["requestId"]
    assert events[3] == {
        "type": "tool_call",
        "seq": 6,
        "threadId": "t000001",
        "requestId": tool_request,
        "toolName": "update_counter",
        "args": {"delta": 2},
    }
    # 8. submit_tool_result with the renamed field
    assert line(
        c,
        {
            "requestId": "phase09_submit",
            "type": "submit_tool_result",
            "payload": {"threadId": "t000001", "requestId": tool_request, "result": {"counter": 2}},
        },
    ) == {"requestId": "phase09_submit", "ok": True, "result": {}}
    assert stream.events(2) == [
        {"type": "status_changed", "seq": 7, "threadId": "t000001", "status": "running"},
        {
            "type": "tool_result",
            "seq": 8,
            "threadId": "t000001",
            "requestId": tool_request,
            "toolName": "update_counter",
            "result": {"counter": 2},
        },
    ]
    # 18. cross-origin access denied
    assert line(
        c,
        {
            "requestId": "ext_1700000000000_20",
            "type": "send_text",
            "callerOrigin": "https://other.example.com",
            "payload": {"threadId": "t000002", "message": "hi"},
        },
    ) == {
        "requestId": "ext_1700000000000_20",
        "ok": False,
        "error": {
            "code": "THREAD_ACCESS_DENIED",
            "message": "thread is not accessible to this caller",
            "details": {"threadId": "t000002"},
        },
    }
    # 9. end_thread with origin, plus the open stream
    t2 = connect(core)
    t2.result("subscribe_thread", {"threadId": "t000002"}, origin=APP)
    assert line(
        c,
        {
            "requestId": "ext_1700000000000_9",
            "type": "end_thread",
            "callerOrigin": APP,
            "payload": {"threadId": "t000002"},
        },
    ) == {"requestId": "ext_1700000000000_9", "ok": True, "result": {}}
    assert t2.events(3) == [
        {"type": "status_changed", "seq": 3, "threadId": "t000002", "status": "stopping"},
        {"type": "status_changed", "seq": 4, "threadId": "t000002", "status": "ended"},
        {"type": "ended", "seq": 5, "threadId": "t000002"},
    ]
    t2.close()
    assert core.wait_for(lambda k: k.stream_eofs("t000002") == 1)
    # 7. busy thread
    c.result("send_text", {"threadId": "t000001", "message": "/sleep 500"})
    assert line(
        c,
        {
            "requestId": "send_1",
            "type": "send_text",
            "payload": {"threadId": "t000001", "message": "hello"},
        },
    ) == {
        "requestId": "send_1",
        "ok": False,
        "error": {
            "code": "THREAD_BUSY",
            "message": "thread is already running",
            "details": {"threadId": "t000001"},
        },
    }
    # 8.5 an unknown type; the rejected native types are Core types too
    assert c.error("update_settings", {})["message"] == "unknown Core IPC request type"


def test_section_9_9_current(
    make_core: CoreFactory, connect: ClientFactory, tmp_path: Path
) -> None:
    core = make_core("current")
    c = connect(core)
    directory = str(tmp_path / "ws")
    os.mkdir(directory)
    workspace = {"workspaceId": "ws_000001", "path": directory}
    # C7. open_workspace with a path
    assert line(
        c,
        {
            "requestId": "ext_1_9",
            "type": "open_workspace",
            "callerOrigin": APP,
            "callerSdkVersion": "0.4.0",
            "payload": {"path": directory},
        },
    ) == {"requestId": "ext_1_9", "ok": True, "result": {"workspace": workspace}}
    assert core.requests("open_workspace")[0].caller_sdk_version == "0.4.0"
    assert line(
        c, {"requestId": "v", "type": "open_workspace", "callerOrigin": APP, "payload": {"path": 5}}
    ) == {
        "requestId": "v",
        "ok": False,
        "error": {"code": "INVALID_INPUT", "message": "open_workspace path must be a string"},
    }
    # C1. create_thread with the new fields
    assert line(
        c,
        {
            "requestId": "ext_1_1",
            "type": "create_thread",
            "callerOrigin": APP,
            "callerSdkVersion": "0.4.0",
            "payload": {
                "provider": "codex",
                "model": "gpt-5",
                "effortLevel": "high",
                "skills": {"guidance": "Use tools.", "tools": []},
                "workspaceId": "ws_000001",
            },
        },
    ) == {
        "requestId": "ext_1_1",
        "ok": True,
        "result": {
            "threadId": "t000001",
            "workspaceId": "ws_000001",
            "workspacePath": directory,
            "explicitModelConfigApplied": True,
        },
    }
    # C2. subscribe_thread relays the snapshot
    snapshot = {"threadId": "t000001", "workspaceId": "ws_000001", "status": "idle", "latestSeq": 2}
    stream = connect(core)
    assert line(
        stream,
        {
            "requestId": "ext_1_2",
            "type": "subscribe_thread",
            "callerOrigin": APP,
            "payload": {"threadId": "t000001"},
        },
    ) == {
        "requestId": "ext_1_2",
        "ok": True,
        "result": {"subscribed": True, "snapshot": snapshot, "workspace": workspace},
    }
    # C3. thread_snapshot for a duplicate subscribe
    assert line(
        c,
        {
            "requestId": "ext_1_3",
            "type": "thread_snapshot",
            "callerOrigin": APP,
            "payload": {"threadId": "t000001"},
        },
    ) == {
        "requestId": "ext_1_3",
        "ok": True,
        "result": snapshot,
    }
    # C5. send_text with an operation
    assert line(
        c,
        {
            "requestId": "ext_1_5",
            "type": "send_text",
            "callerOrigin": APP,
            "payload": {"threadId": "t000001", "message": "hello", "operationId": "op_page_1"},
        },
    ) == {
        "requestId": "ext_1_5",
        "ok": True,
        "result": {"threadId": "t000001", "operationId": "op_page_1"},
    }
    op = {"threadId": "t000001", "operationId": "op_page_1"}
    assert stream.events(6) == [
        {"type": "status_changed", "seq": 3, "status": "running", **op},
        {"type": "assistant_delta", "seq": 4, "text": "echo: hello", **op},
        {"type": "assistant_message", "seq": 5, "text": "echo: hello", **op},
        {"type": "usage_updated", "seq": 6, "threadId": "t000001", "totalTokens": 3},
        {"type": "status_changed", "seq": 7, "status": "idle", **op},
        {"type": "operation_completed", "seq": 8, "operationKind": "user", "success": True, **op},
    ]
    # C6. end, then reactivate with resume_thread
    assert line(
        c,
        {
            "requestId": "ext_1_6",
            "type": "end_thread",
            "callerOrigin": APP,
            "payload": {"threadId": "t000001"},
        },
    ) == {
        "requestId": "ext_1_6",
        "ok": True,
        "result": {},
    }
    assert stream.events(3) == [
        {"type": "status_changed", "seq": 9, "threadId": "t000001", "status": "stopping"},
        {"type": "status_changed", "seq": 10, "threadId": "t000001", "status": "ended"},
        {"type": "ended", "seq": 11, "threadId": "t000001"},
    ]
    stream.close()
    assert core.wait_for(lambda k: k.stream_eofs("t000001") == 1)
    again = connect(core)
    sub = again.result(
        "subscribe_thread", {"threadId": "t000001"}, origin=APP, request_id="ext_1_7"
    )
    assert sub["snapshot"]["status"] == "ended" and sub["snapshot"]["latestSeq"] == 11
    assert "duplicate" not in sub
    resumed = line(
        c,
        {
            "requestId": "ext_1_8",
            "type": "resume_thread",
            "callerOrigin": APP,
            "payload": {"threadId": "t000001"},
        },
    )
    assert isinstance(resumed, dict)
    last = resumed["result"]["snapshot"].pop("lastCompletedOperation")
    assert resumed == {
        "requestId": "ext_1_8",
        "ok": True,
        "result": {
            "snapshot": {
                "threadId": "t000001",
                "workspaceId": "ws_000001",
                "status": "idle",
                "latestSeq": 12,
                "usage": {"totalTokens": 3},
            }
        },
    }
    assert last["operationId"] == "op_page_1" and last["success"] is True
    assert again.events(1) == [
        {"type": "status_changed", "seq": 12, "threadId": "t000001", "status": "idle"}
    ]
    # C11. the Core closes a current stream; a re-subscribe gets a fresh one
    before = core.connection_count
    core.close_streams("t000001")
    assert again.read_raw() is None
    fresh = connect(core)
    result = fresh.result(
        "subscribe_thread", {"threadId": "t000001"}, origin=APP, request_id="ext_1_41"
    )
    assert core.connection_count == before + 1
    assert (
        set(result) == {"subscribed", "snapshot", "workspace"} and result["workspace"] == workspace
    )
    # C8. ping of the current generation
    assert c.result("ping") == {"connected": True, "version": "0.4.0", "processId": os.getpid()}
    # C10. workspace_run without an origin
    assert line(
        c,
        {
            "requestId": "req_run",
            "type": "workspace_run",
            "payload": {"workspaceId": "ws_000001", "script": "console.log(1)"},
        },
    ) == {
        "requestId": "req_run",
        "ok": False,
        "error": {
            "code": "IPC_UNAUTHORIZED",
            "message": "workspace operation requires an approved caller origin",
        },
    }


def test_c6_legacy_resume_is_unknown(make_core: CoreFactory, connect: ClientFactory) -> None:
    c = connect(make_core("legacy"))
    c.result("create_thread", {"provider": "codex"}, origin=APP)
    assert line(
        c,
        {
            "requestId": "ext_1_8",
            "type": "resume_thread",
            "callerOrigin": APP,
            "payload": {"threadId": "t000001"},
        },
    ) == {
        "requestId": "ext_1_8",
        "ok": False,
        "error": {
            "code": "IPC_UNAVAILABLE",
            "message": "unknown Core IPC request type",
            "details": {"type": "resume_thread"},
        },
    }


def test_c9_oversize_listing_layout(make_core: CoreFactory, connect: ClientFactory) -> None:
    c = connect(make_core(faults=Faults(oversize_response={"workspace_list_files": 1_048_576})))
    c.send(
        {
            "requestId": "ext_1_30",
            "type": "workspace_list_files",
            "callerOrigin": APP,
            "payload": {"workspaceId": "ws_000001", "path": "/"},
        }
    )
    expected = (
        b'{"requestId":"ext_1_30","ok":true,"result":{"paths":["' + b"x" * 1_048_518 + b'"]}}'
    )
    assert len(expected) == 1_048_576
    assert json.loads(c.read_raw() or b"") == json.loads(expected)
