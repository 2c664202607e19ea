"""Request envelope validation exactly as Core does it (spec 3.4)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from native_host.devcore.wire import CoreError

_IPC = "IPC_UNAVAILABLE"


@dataclass(frozen=True)
class Request:
    """A request whose envelope passed validation; the payload is still undecoded."""

    request_id: str
    type: str
    caller_origin: str | None
    payload: Any


class EnvelopeError(Exception):
    """An envelope Core rejects before dispatch; `request_id` is what the reply carries."""

    def __init__(self, request_id: str, error: CoreError) -> None:
        super().__init__(error.message)
        self.request_id = request_id
        self.error = error


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_envelope(line: bytes) -> Request:
    """Decode and check one request line, in the order of the spec 3.4 table."""
    try:
        envelope = json.loads(line, parse_constant=_reject_constant)
    except ValueError as exc:
        raise EnvelopeError(
            "", CoreError(_IPC, "Core IPC request was not valid JSON", {"error": str(exc)})
        ) from None
    problem = _shape_problem(envelope)
    if problem is not None:
        raise EnvelopeError(
            "", CoreError(_IPC, "Core IPC request had invalid shape", {"error": problem})
        )
    request_id = envelope.get("requestId")
    if request_id is None or not request_id.strip():
        raise EnvelopeError("", CoreError(_IPC, "requestId is required"))
    request_type = envelope.get("type")
    if request_type is None or not request_type.strip():
        raise EnvelopeError(request_id, CoreError(_IPC, "type is required"))
    return Request(request_id, request_type, envelope.get("callerOrigin"), envelope.get("payload"))


def _shape_problem(envelope: Any) -> str | None:
    """Why the envelope's own fields have the wrong JSON types, or None."""
    if not isinstance(envelope, dict):
        return "request must be a JSON object"
    for key in ("requestId", "type"):
        if key in envelope and not isinstance(envelope[key], str):
            return f"{key} must be a string"
    for key in ("callerOrigin", "callerSdkVersion"):
        value = envelope.get(key)
        if value is not None and not isinstance(value, str):
            return f"{key} must be a string or null"
    return None
