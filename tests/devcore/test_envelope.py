"""Framing and envelope validation (spec 3.2, 3.4), and the request record."""

from __future__ import annotations

import json

import pytest

from native_host.devcore import DevCore
from native_host.devcore.wire import MAX_LINE_BYTES
from tests.support.core_lines import ClientFactory, CoreFactory, LineClient

pytestmark = pytest.mark.unit

IPC = "IPC_UNAVAILABLE"


def test_not_json_keeps_connection_open(client: LineClient) -> None:
    client.send_raw(b"not json\n")
    reply = client.read()
    assert reply["requestId"] == ""
    assert reply["ok"] is False
    assert reply["error"]["code"] == IPC
    assert reply["error"]["message"] == "Core IPC request was not valid JSON"
    assert isinstance(reply["error"]["details"]["error"], str)
    assert client.result("ping")["connected"] is True


@pytest.mark.parametrize(
    "line", [b"NaN", b'{"requestId":"a","type":"ping","payload":NaN}', b"\xff\xfe"]
)
def test_non_json_variants(client: LineClient, line: bytes) -> None:
    client.send_raw(line + b"\n")
    assert client.read()["error"]["message"] == "Core IPC request was not valid JSON"


@pytest.mark.parametrize(
    "envelope",
    [
        [1, 2],
        "ping",
        {"requestId": 5, "type": "ping"},
        {"requestId": None, "type": "ping"},
        {"requestId": "a", "type": 7},
        {"requestId": "a", "type": "ping", "callerOrigin": 3},
    ],
)
def test_invalid_shape(client: LineClient, envelope: object) -> None:
    client.send_raw(json.dumps(envelope).encode() + b"\n")
    reply = client.read()
    assert reply["requestId"] == ""
    assert reply["error"]["message"] == "Core IPC request had invalid shape"
    assert isinstance(reply["error"]["details"]["error"], str)


@pytest.mark.parametrize("envelope", [{"type": "ping"}, {"requestId": "  ", "type": "ping"}])
def test_request_id_required(client: LineClient, envelope: dict[str, str]) -> None:
    client.send(envelope)
    reply = client.read()
    assert reply == {
        "requestId": "",
        "ok": False,
        "error": {"code": IPC, "message": "requestId is required"},
    }


@pytest.mark.parametrize("envelope", [{"requestId": " r "}, {"requestId": " r ", "type": " "}])
def test_type_required_echoes_untrimmed_id(client: LineClient, envelope: dict[str, str]) -> None:
    client.send(envelope)
    assert client.read() == {
        "requestId": " r ",
        "ok": False,
        "error": {"code": IPC, "message": "type is required"},
    }


@pytest.mark.parametrize("kind", ["update_settings", "Ping", " ping", "deno_run"])
def test_unknown_type(client: LineClient, kind: str) -> None:
    assert client.error(kind) == {
        "code": IPC,
        "message": "unknown Core IPC request type",
        "details": {"type": kind},
    }


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("send_text", None),
        ("send_text", {"threadId": "t000001"}),
        ("send_text", {"threadId": 1, "message": "x"}),
        ("create_thread", {}),
        ("create_thread", {"provider": "gemini"}),
        ("create_thread", {"provider": "codex", "skills": {"tools": [{"name": "x"}]}}),
        ("submit_tool_result", {"threadId": "t000001", "requestId": "x"}),
        ("create_asset_upload", {"threadId": "t000001", "filename": "a", "sizeBytes": -1}),
        ("subscribe_thread", []),
    ],
)
def test_payload_invalid_shape(client: LineClient, kind: str, payload: object) -> None:
    error = client.error(kind, payload)
    assert error["code"] == IPC
    assert error["message"] == "Core IPC request payload had invalid shape"
    assert error["details"]["type"] == kind
    assert isinstance(error["details"]["error"], str)


def test_ignored_payloads_accept_anything(client: LineClient) -> None:
    for kind in ("ping", "get_settings", "list_providers"):
        assert client.request(kind, None)["ok"] is True
        assert client.request(kind, [1, "x"])["ok"] is True


def test_thread_not_found_after_payload_decode(client: LineClient) -> None:
    assert client.error("send_text", {"threadId": "t0000zz", "message": "hi"}) == {
        "code": "THREAD_NOT_FOUND",
        "message": "thread was not found",
        "details": {"threadId": "t0000zz"},
    }


def test_several_requests_per_connection_in_order(client: LineClient) -> None:
    client.send_raw(
        b'{"requestId":"a","type":"ping"}\r\n'
        b'{"requestId":"b","type":"get_settings"}\n'
        b'{"requestId":"c","type":"nope"}\n'
    )
    assert [client.read()["requestId"] for _ in range(3)] == ["a", "b", "c"]


def test_unterminated_last_line_counts(core: DevCore, client: LineClient) -> None:
    client.send_raw(b'{"requestId":"last","type":"ping"}')
    client.sock.shutdown(1)
    assert client.read()["requestId"] == "last"
    assert client.read_raw() is None
    assert core.wait_for(lambda c: c.eof_connections == 1)


def test_compact_sorted_non_ascii_output(client: LineClient) -> None:
    client.send({"requestId": "é", "type": "ping"})
    raw = client.read_raw()
    assert raw is not None
    assert raw.startswith('{"ok":true,"requestId":"é","result":{'.encode())


def test_line_of_exactly_the_limit_is_read(client: LineClient) -> None:
    head = b'{"requestId":"big","type":"ping","payload":{"pad":"'
    tail = b'"}}'
    client.send_raw(head + b"x" * (MAX_LINE_BYTES - len(head) - len(tail)) + tail + b"\n")
    assert client.read()["requestId"] == "big"


def test_oversize_line_answered_and_closed(core: DevCore, client: LineClient) -> None:
    client.send_raw(b"x" * (MAX_LINE_BYTES + 1) + b"\n")
    assert client.read() == {
        "requestId": "",
        "ok": False,
        "error": {"code": "MESSAGE_TOO_LARGE", "message": "Core IPC message exceeds size limit"},
    }
    assert client.wait_eof()
    last = core.record[-1]
    assert last.oversize and last.size_bytes > MAX_LINE_BYTES and last.raw == ""


def test_oversize_without_newline_is_detected_early(client: LineClient) -> None:
    client.send_raw(b"y" * (3 * MAX_LINE_BYTES))
    assert client.read()["error"]["code"] == "MESSAGE_TOO_LARGE"


def test_record_has_every_line(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core("legacy")
    first, second = connect(core), connect(core)
    first.send_raw(b"garbage\n")
    assert first.read()["ok"] is False  # the garbage's own answer, before the ping's
    pong = first.request(
        "ping", {"x": 1}, request_id="p1", origin="https://a.example", callerSdkVersion="0.4.0"
    )
    assert pong["requestId"] == "p1"
    second.request("list_providers", request_id="p2")
    record = core.record
    assert record[0].raw == "garbage"
    assert record[0].envelope is None and record[0].type is None
    ping = core.requests("ping")[0]
    assert (
        ping.connection_id
        == record[0].connection_id
        != core.requests("list_providers")[0].connection_id
    )
    assert ping.request_id == "p1"
    assert ping.caller_origin == "https://a.example"
    assert ping.caller_sdk_version == "0.4.0"
    assert ping.payload == {"x": 1}
    assert json.loads(ping.raw) == ping.envelope
    assert core.connection_count == 2
    assert len(core.requests()) == 3
