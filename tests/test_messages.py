"""Pure tests of the native -> Core transformation table (spec 1.6, 9.2, 9.5)."""

from __future__ import annotations

from typing import Any

import pytest

from native_host.errors import HostError
from native_host.messages import (
    HOST_LOCAL_TYPES,
    RELAY_RULES,
    core_envelope,
    core_payload,
    response_timeout_ms,
    validate_envelope,
)

pytestmark = pytest.mark.unit


def test_there_are_24_relay_types_and_3_host_local_ones() -> None:
    assert len(RELAY_RULES) == 24
    assert {"approve_origin", "revoke_origin", "list_origin_approvals"} == HOST_LOCAL_TYPES


@pytest.mark.parametrize(
    ("kind", "message", "payload"),
    [
        ("ping", {"junk": 1}, {}),
        (
            "send_text",
            {"threadId": "t", "message": "", "extra": [1]},
            {"threadId": "t", "message": "", "extra": [1]},
        ),
        (
            "submit_tool_result",
            {"threadId": "t", "toolRequestId": "x", "result": None},
            {"threadId": "t", "requestId": "x", "result": None},
        ),
        ("submit_tool_result", {"threadId": "t", "result": 1}, {"threadId": "t", "result": 1}),
        (
            "create_thread",
            {"provider": "codex", "model": None, "workspace": {"path": "/"}},
            {"provider": "codex", "model": None},
        ),
        ("open_workspace", {"path": "/x", "mode": "rw"}, {"path": "/x"}),
        ("open_workspace", {}, {}),
        (
            "workspace_run",
            {"workspaceId": "w", "script": "s", "env": {}},
            {"workspaceId": "w", "script": "s"},
        ),
        ("abort_session_setup", {"threadId": "t", "reason": "x"}, {"threadId": "t"}),
    ],
)
def test_payload_rules(kind: str, message: dict[str, Any], payload: dict[str, Any]) -> None:
    full = {
        **message,
        "type": kind,
        "requestId": "r",
        "callerOrigin": "https://a.example",
        "callerSdkVersion": "1",
    }
    assert core_payload(kind, full) == payload


def test_sdk_version_goes_to_the_envelope_only_as_a_string() -> None:
    request = validate_envelope({"type": "ping", "requestId": "r", "callerSdkVersion": "0.4.0"})
    assert core_envelope(request, None) == {
        "requestId": "r",
        "type": "ping",
        "callerSdkVersion": "0.4.0",
        "payload": {},
    }
    request = validate_envelope({"type": "ping", "requestId": "r", "callerSdkVersion": 4})
    assert "callerSdkVersion" not in core_envelope(request, None)


@pytest.mark.parametrize(
    ("kind", "payload", "expected"),
    [
        ("open_workspace", {}, None),
        ("open_workspace", {"path": 5}, None),
        ("open_workspace", {"path": "/x"}, 120_000),
        ("workspace_run", {"timeoutMs": 1000}, 31_000),
        ("workspace_run", {"timeoutMs": 0}, 90_000),
        ("workspace_run", {"timeoutMs": True}, 90_000),
        ("workspace_run", {}, 90_000),
        ("list_providers", {}, 120_000),
        ("thread_snapshot", {}, 120_000),
    ],
)
def test_response_timeouts(kind: str, payload: dict[str, Any], expected: int | None) -> None:
    assert response_timeout_ms(kind, payload, 120_000) == expected


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ({"type": "ping"}, "requestId is required"),
        ({"type": "ping", "requestId": ""}, "requestId is required"),
        ({"requestId": "r", "type": 3}, "type is required"),
        ({"requestId": "r", "type": "tool_call"}, "unknown native request type"),
        ([], "native message must be an object"),
    ],
)
def test_envelope_validation(message: Any, text: str) -> None:
    with pytest.raises(HostError) as caught:
        validate_envelope(message)
    assert caught.value.message == text
