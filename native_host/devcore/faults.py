"""Fault injection (spec 9.8 item 9 and the host's failure tests).

Every field defaults to "no fault". The JSON form (CLI `--faults`) uses camelCase keys;
Python code uses the snake_case names. Unknown keys are rejected so a typo cannot silently
disable the fault a test relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from native_host.devcore.wire import dumps


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class OversizeEvent(_Model):
    """An event line of exactly `size_bytes` bytes, written on every new stream."""

    type: str = "assistant_message"
    size_bytes: int = Field(default=2_000_000, gt=0)


class Faults(_Model):
    """What the dev Core does wrong on purpose."""

    delay_ms: dict[str, int] = Field(default_factory=dict)
    """Sleep this long before answering a request of the given type."""
    hang_types: set[str] = Field(default_factory=set)
    """Read such a request and never answer anything on that connection again."""
    drop_types: set[str] = Field(default_factory=set)
    """Read such a request, then close the connection without answering."""
    exit_on_type: str | None = None
    """Die when such a request arrives: `os._exit(3)` from the CLI, `crash()` in-process."""
    oversize_response: dict[str, int] = Field(default_factory=dict)
    """Answer the type with an `ok:true` line of exactly this many bytes (spec 8 #23, 9.9 C9)."""
    canned_responses: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Answer the type with this object (its `requestId` defaults to the request's)."""
    event_before_subscribe_response: bool = False
    """Write one event line before the subscribe response (the race of spec 3.8)."""
    garbage_line_after_subscribe: str | None = None
    """Write this raw line on every new stream right after the subscribe response."""
    close_stream_after_events: int | None = Field(default=None, ge=0)
    """Close each stream from the Core side after writing this many events on it."""
    thread_snapshot_unknown: bool = False
    """Answer `thread_snapshot` as an unknown request type (spec 9.9 C4 b)."""
    open_workspace_block_ms: int | None = Field(default=None, ge=0)
    """`open_workspace` without `path` answers `{workspace:null}` only after this long."""
    open_workspace_block_until_close: bool = False
    """`open_workspace` without `path` never answers; it waits for the client to close."""
    oversize_event: OversizeEvent | None = None
    """Write an oversize event on every new stream right after the subscribe response."""
    hold_stream_events_ms: int | None = Field(default=None, ge=0)
    """Deliver each stream event this long after it happened, preserving order."""
    response_request_id: str | None = None
    """Answer every request with this requestId instead of echoing the request's."""


def exact_line(build: Callable[[str], Any], size: int) -> bytes:
    """Serialise `build("x" * k)` with k chosen so the line is exactly `size` bytes (or minimal)."""
    base = len(dumps(build("")))
    return dumps(build("x" * max(0, size - base)))


def oversize_response_line(request_id: str, request_type: str, size: int) -> bytes:
    """An `ok:true` line of exactly `size` bytes shaped like a real result of that type."""

    def build(pad: str) -> dict[str, Any]:
        result: dict[str, Any]
        if request_type == "list_assets":
            asset = {"name": pad, "path": "/big", "sizeBytes": 1, "modifiedAt": 0}
            result = {"assets": [asset]}
        elif request_type in ("workspace_list_files", "workspace_list_folders"):
            result = {"paths": [pad]}
        elif request_type == "workspace_run":
            result = {
                "exitCode": 0,
                "stdout": pad,
                "stderr": "",
                "stdoutTruncated": False,
                "stderrTruncated": False,
            }
        else:
            result = {"padding": pad}
        return {"requestId": request_id, "ok": True, "result": result}

    return exact_line(build, size)


_PAD_FIELD = {
    "assistant_message": "text",
    "assistant_delta": "text",
    "raw_stdout": "text",
    "raw_stderr": "text",
    "tool_result": "result",
    "tool_call": "args",
    "provider_command_started": "prompt",
}


def oversize_event_line(event: dict[str, Any], size: int) -> bytes:
    """A `thread_event` line of exactly `size` bytes around `event`.

    The padded field sorts before `threadId` and `type`, so the event type sits in the
    last few bytes of the line, as with the real Core's sorted serialiser (spec 7.8).
    """
    field = _PAD_FIELD.get(str(event.get("type")), "padding")
    return exact_line(lambda pad: {"type": "thread_event", "event": {**event, field: pad}}, size)
