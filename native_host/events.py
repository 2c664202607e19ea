"""Thread events on their way to the browser: size rules and synthetic errors (spec 7.7-7.9, 9.3).

Pure functions of events and bytes; the subscription code decides what to do with the result.
"""

from __future__ import annotations

from native_host import errors
from native_host.codec import encode
from native_host.framing import MAX_FRAME_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

INFORMATIONAL_TYPES = frozenset(
    {
        "created",
        "raw_stdout",
        "raw_stderr",
        "tool_result",
        "provider_command_started",
        "provider_session_id_updated",
    }
)
"""Events the page never sees: oversize ones are shortened or dropped, never an error."""

MAX_EVENT_TYPE_CHARS = 64
"""The longest event type an error names (the types of spec 7.7 are a few words)."""
_TYPE_PATTERN = rb'"type"\s*:\s*"([A-Za-z0-9_]{1,%d})"' % MAX_EVENT_TYPE_CHARS
_PROTECTED_FIELDS = frozenset({"type", "threadId"})


def wrap_event(event: dict[str, Any]) -> dict[str, Any]:
    return {"type": "thread_event", "event": event}


def is_informational(event: dict[str, Any]) -> bool:
    """Whether the page never needs to see `event` (a Core's `type` may be any JSON)."""
    kind = event.get("type")
    return isinstance(kind, str) and kind in INFORMATIONAL_TYPES


class EventFrame:
    """The outcome of fitting one event into a frame.

    `body` is set when the event (possibly truncated) fits; otherwise `size` is the
    size the frame would have had and `dropped` says whether it may be dropped silently.
    """

    __slots__ = ("body", "dropped", "size", "truncated")

    def __init__(
        self, body: bytes | None, size: int, truncated: bool = False, dropped: bool = False
    ) -> None:
        self.body = body
        self.size = size
        self.truncated = truncated
        self.dropped = dropped


def _truncate(event: dict[str, Any]) -> bytes | None:
    """Shorten the longest top-level string so the frame fits, or None if none can."""
    candidates = [
        (len(v), k) for k, v in event.items() if isinstance(v, str) and k not in _PROTECTED_FIELDS
    ]
    if not candidates:
        return None
    _, field = max(candidates)
    text: str = event[field]

    def body_for(length: int) -> bytes:
        return encode(wrap_event({**event, field: text[:length], "truncated": True}))

    if len(body_for(0)) > MAX_FRAME_BYTES:
        return None
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if len(body_for(middle)) <= MAX_FRAME_BYTES:
            low = middle
        else:
            high = middle - 1
    return body_for(low)


def fit_event(event: dict[str, Any]) -> EventFrame:
    """Encode an event frame within the 1 MiB cap, shortening informational events."""
    body = encode(wrap_event(event))
    if len(body) <= MAX_FRAME_BYTES:
        return EventFrame(body=body, size=len(body))
    if is_informational(event):
        shortened = _truncate(event)
        if shortened is not None:
            return EventFrame(body=shortened, size=len(body), truncated=True)
        return EventFrame(body=None, size=len(body), dropped=True)
    return EventFrame(body=None, size=len(body))


def _naming_details(event: dict[str, Any]) -> dict[str, Any]:
    """The details that name an event the page will not get (spec 7.7, 7.8): its `type`
    when that is a type name (a string of at most MAX_EVENT_TYPE_CHARS, as the oversize
    line's search finds) and its `seq` when that is an integer. Anything else is left
    out: the Core's own oversize or over-deep value copied into the error would make the
    error itself too large or too deep to write, and the page would get nothing."""
    details: dict[str, Any] = {"stage": errors.STAGE_RELAY_EVENT}
    kind = event.get("type")
    if isinstance(kind, str) and 0 < len(kind) <= MAX_EVENT_TYPE_CHARS:
        details["eventType"] = kind
    seq = event.get("seq")
    if isinstance(seq, int) and not isinstance(seq, bool):
        details["seq"] = seq
    return details


def oversize_event_error(event: dict[str, Any], size: int) -> dict[str, Any]:
    """The error for an event the page would see but that cannot fit a frame (spec 7.7)."""
    details = _naming_details(event)
    details["sizeBytes"] = size
    return {
        "code": errors.MESSAGE_TOO_LARGE,
        "message": errors.MSG_EVENT_TOO_LARGE,
        "details": details,
    }


def find_event_type(head: bytes, tail: bytes) -> str | None:
    """The event `type` of an oversize stream line, from its first and last bytes (spec 7.8).

    Core sorts keys, so the event's own `type` is usually the last one before the
    envelope's `"type":"thread_event"`; the head is searched when the tail has none.
    """
    import re

    in_tail = [m.group(1).decode() for m in re.finditer(_TYPE_PATTERN, tail)]
    in_tail = [t for t in in_tail if t != "thread_event"]
    if in_tail:
        return in_tail[-1]
    in_head = [m.group(1).decode() for m in re.finditer(_TYPE_PATTERN, head)]
    in_head = [t for t in in_head if t != "thread_event"]
    return in_head[0] if in_head else None


def oversize_line_error(size: int, event_type: str | None) -> dict[str, Any]:
    """The error for a Core stream line over 1 MiB (spec 7.8)."""
    details: dict[str, Any] = {"stage": errors.STAGE_RELAY_EVENT, "sizeBytes": size}
    if event_type is not None:
        details["eventType"] = event_type
    return {
        "code": errors.MESSAGE_TOO_LARGE,
        "message": errors.MSG_CORE_LINE_TOO_LARGE,
        "details": details,
    }


def too_deep_event_error(event: dict[str, Any], limit: int) -> dict[str, Any]:
    """The error for an event nested deeper than the browser reads (codec.MAX_DEPTH):
    reported like an oversize line (spec 7.8), with the event's type and seq."""
    details = _naming_details(event)
    details["limitDepth"] = limit
    return {
        "code": errors.MESSAGE_TOO_LARGE,
        "message": errors.MSG_CORE_LINE_TOO_DEEP,
        "details": details,
    }


def stream_error(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {
        "code": code,
        "message": message,
        "details": {"stage": errors.STAGE_RELAY_EVENT, **details},
    }


def synthetic_error_event(thread_id: str, error: dict[str, Any]) -> dict[str, Any]:
    """A legacy stream's failure as a seq-less `error` event (spec 7.9)."""
    return wrap_event({"type": "error", "threadId": thread_id, "source": "core", "error": error})


def subscription_closed(thread_id: str, error: dict[str, Any]) -> dict[str, Any]:
    """A current stream's end (spec 9.3)."""
    return {"type": "thread_subscription_closed", "threadId": thread_id, "error": error}
