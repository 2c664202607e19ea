"""Core threads: the state machine, event sequences and tool requests (spec 3.6, 3.9, 9.6, 9.8).

A thread shares its channel's lock, so a state change and the events it emits are atomic
and a snapshot's `latestSeq` always matches the status it reports.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from native_host.devcore.assets import now_ms
from native_host.devcore.payloads import ToolDef
from native_host.devcore.streams import Channel
from native_host.devcore.wire import CoreError
from native_host.devcore.workspaces import Workspace

DEFAULT_TOOL_TIMEOUT_MS = 60_000
BUSY_STATUSES = frozenset({"starting", "running", "waitingToolResult", "stopping"})
_TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
_tool_request_counter = itertools.count(1)


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a thread's skills manifest."""

    name: str
    description: str
    args_schema: Any
    timeout_ms: int

    def to_json(self) -> dict[str, Any]:
        """The `tool_spec` result."""
        return {
            "name": self.name,
            "description": self.description,
            "argsSchema": self.args_schema,
            "timeoutMs": self.timeout_ms,
        }


def validate_tools(tools: list[ToolDef]) -> list[ToolSpec]:
    """Check a manifest the way `create_thread` does (TOOLS_MANIFEST_INVALID)."""
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for tool in tools:

        def invalid(message: str, name: str = tool.name) -> CoreError:
            return CoreError("TOOLS_MANIFEST_INVALID", message, {"toolName": name})

        if not _TOOL_NAME.match(tool.name):
            raise invalid("tool name must match ^[A-Za-z][A-Za-z0-9_.-]*$")
        if not tool.description.strip():
            raise invalid("tool description must not be empty")
        if tool.name in seen:
            raise invalid("tool names must be unique")
        if not _is_schema(tool.args_schema):
            raise invalid("tool argsSchema must be a valid JSON Schema")
        if tool.timeout_ms is not None and tool.timeout_ms <= 0:
            raise invalid("tool timeoutMs must be positive")
        seen.add(tool.name)
        specs.append(
            ToolSpec(
                tool.name,
                tool.description,
                tool.args_schema,
                tool.timeout_ms or DEFAULT_TOOL_TIMEOUT_MS,
            )
        )
    return specs


def _is_schema(schema: Any) -> bool:
    """A minimal JSON Schema check: an object (or boolean) whose `type`s are known names."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if not all(isinstance(k, str) and k in _JSON_TYPES for k in kinds):
        return False
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    return isinstance(properties, dict) and isinstance(required, list)


def _matches_type(value: Any, kind: str) -> bool:
    checks: dict[str, bool] = {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }
    return checks.get(kind, True)


def check_args(schema: Any, args: dict[str, Any]) -> str | None:
    """Why `args` do not fit the schema (required keys, property types), or None. A subset."""
    if not isinstance(schema, dict):
        return None if schema is not False else "schema rejects every value"
    properties: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in args:
            return f"missing required property {key!r}"
    for key, value in args.items():
        sub = properties.get(key)
        if sub is None:
            if schema.get("additionalProperties") is False:
                return f"unexpected property {key!r}"
            continue
        kind = sub.get("type") if isinstance(sub, dict) else None
        kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
        if kinds and not any(_matches_type(value, k) for k in kinds):
            return f"property {key!r} must be {' or '.join(kinds)}"
    return None


@dataclass
class PendingTool:
    """A tool request waiting for `submit_tool_result`."""

    request_id: str
    tool_name: str
    args: dict[str, Any]
    operation_id: str | None
    created_at: int
    timeout_ms: int
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    closed: bool = False

    def to_json(self, thread_id: str) -> dict[str, Any]:
        """The snapshot's `pendingToolRequest`."""
        data: dict[str, Any] = {
            "requestId": self.request_id,
            "threadId": thread_id,
            "toolName": self.tool_name,
            "args": self.args,
            "createdAt": self.created_at,
            "timeoutMs": self.timeout_ms,
        }
        if self.operation_id is not None:
            data["operationId"] = self.operation_id
        return data


class DevThread:
    """One Core thread and everything a snapshot reports about it."""

    def __init__(
        self,
        thread_id: str,
        *,
        provider: str,
        model: str | None,
        owner: str | None,
        tools: list[ToolSpec],
        workspace: Workspace | None,
        assets_dir: Path,
        channel: Channel,
        current: bool,
    ) -> None:
        self.thread_id = thread_id
        self.provider = provider
        self.model = model
        self.owner = owner
        self.tools = {tool.name: tool for tool in tools}
        self.workspace = workspace
        self.assets_dir = assets_dir
        self.channel = channel
        self.current = current
        self.lock = channel.lock
        self.status = "idle"
        self.total_tokens: int | None = None
        self.active_op: dict[str, Any] | None = None
        self.last_op: dict[str, Any] | None = None
        self.pending: PendingTool | None = None
        self.prepared = False
        self.turn_gen = 0
        """Bumped by end_thread: a running turn whose generation differs stops emitting."""

    def emit(self, event_type: str, op: str | None = None, **fields: Any) -> dict[str, Any]:
        """Emit an event; `op` becomes `operationId` on the current generation only."""
        if self.current and op is not None:
            fields["operationId"] = op
        return self.channel.emit(event_type, fields)

    def set_status(self, status: str, op: str | None = None) -> None:
        self.status = status
        self.emit("status_changed", op, status=status)

    def begin_operation(self, kind: str, op: str | None) -> None:
        if op is not None:
            self.active_op = {"operationId": op, "operationKind": kind, "startedAt": now_ms()}

    def complete_operation(self, success: bool, error: dict[str, Any] | None = None) -> None:
        """Record the active operation as completed; current Cores emit `operation_completed`."""
        active, self.active_op = self.active_op, None
        if active is None:
            return
        done: dict[str, Any] = {
            "operationId": active["operationId"],
            "operationKind": active["operationKind"],
            "success": success,
            "completedAt": now_ms(),
        }
        if error is not None:
            done["error"] = error
        self.last_op = done
        if self.current:
            extra = {"error": error} if error is not None else {}
            self.emit(
                "operation_completed",
                active["operationId"],
                operationKind=active["operationKind"],
                success=success,
                **extra,
            )

    def snapshot(self) -> dict[str, Any]:
        """The current-generation snapshot (spec 9.3); call with the lock held."""
        snap: dict[str, Any] = {
            "threadId": self.thread_id,
            "workspaceId": self.workspace.workspace_id if self.workspace else None,
            "status": self.status,
            "latestSeq": self.channel.seq,
        }
        if self.total_tokens is not None:
            snap["usage"] = {"totalTokens": self.total_tokens}
        if self.active_op is not None:
            snap["activeOperation"] = dict(self.active_op)
        if self.last_op is not None:
            snap["lastCompletedOperation"] = dict(self.last_op)
        if self.pending is not None:
            snap["pendingToolRequest"] = self.pending.to_json(self.thread_id)
        return snap

    def details(self) -> dict[str, Any]:
        return {"threadId": self.thread_id}

    def end(self) -> None:
        """end_thread / abort_session_setup: works in any status and re-emits when repeated."""
        with self.lock:
            self.turn_gen += 1
            self._close_pending()
            if self.status != "ended":
                self.set_status("stopping")
                self.complete_operation(False, {"code": "THREAD_ENDED", "message": "thread ended"})
            self.set_status("ended")
            self.emit("ended")

    def resume(self) -> dict[str, Any]:
        """resume_thread: back to idle from ended, idle or error (spec 9.8 item 3)."""
        with self.lock:
            if self.status in BUSY_STATUSES:
                raise CoreError("THREAD_BUSY", "thread is already running", self.details())
            if self.status != "idle":
                self.set_status("idle")
            return {"snapshot": self.snapshot()}

    def _close_pending(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.closed = True
            pending.done.set()

    def call_tool(self, tool_name: str, args: dict[str, Any], stop: threading.Event) -> Any:
        """A tool call as `pedelec-cli tool_call` makes it: blocks until the result or timeout."""
        with self.lock:
            if self.status in ("ended", "stopping"):
                raise CoreError("THREAD_ENDED", "thread has ended", self.details())
            if self.pending is not None:
                raise CoreError(
                    "PENDING_TOOL_REQUEST_EXISTS",
                    "a tool request is already pending",
                    {**self.details(), "requestId": self.pending.request_id},
                )
            if self.status != "running":
                raise CoreError("THREAD_BUSY", "thread is not running", self.details())
            spec = self.tools.get(tool_name)
            if spec is None:
                raise CoreError(
                    "TOOL_NOT_FOUND",
                    "tool was not found",
                    {**self.details(), "toolName": tool_name},
                )
            args = dict(args)
            timeout_ms = spec.timeout_ms
            override = args.get("timeoutMs")
            if isinstance(override, int) and not isinstance(override, bool) and override > 0:
                timeout_ms = override
                declared = isinstance(
                    spec.args_schema, dict
                ) and "timeoutMs" in spec.args_schema.get("properties", {})
                if not declared:
                    del args["timeoutMs"]
            problem = check_args(spec.args_schema, args)
            if problem is not None:
                raise CoreError(
                    "TOOL_ARGS_INVALID",
                    "tool args do not match argsSchema",
                    {"toolName": tool_name, "error": problem},
                )
            op = self.active_op["operationId"] if self.active_op else None
            pending = PendingTool(
                request_id=f"toolreq_{now_ms()}_{next(_tool_request_counter)}",
                tool_name=tool_name,
                args=args,
                operation_id=op if self.current else None,
                created_at=now_ms(),
                timeout_ms=timeout_ms,
            )
            self.pending = pending
            self.set_status("waitingToolResult", op)
            self.emit("tool_call", op, requestId=pending.request_id, toolName=tool_name, args=args)
        if not _wait(pending.done, stop, timeout_ms / 1000):
            with self.lock:
                if self.pending is pending:
                    self.pending = None
                    self.set_status("running", op)
                    raise CoreError(
                        "TOOL_TIMEOUT",
                        "tool timeout",
                        {
                            **self.details(),
                            "requestId": pending.request_id,
                            "timeoutMs": timeout_ms,
                        },
                    )
        if pending.closed or not pending.done.is_set():
            raise CoreError(
                "TOOL_TIMEOUT",
                "tool result channel closed",
                {**self.details(), "requestId": pending.request_id},
            )
        return pending.result

    def submit(self, request_id: str, result: Any) -> bool:
        """Deliver a tool result; False when this thread has no such pending request."""
        with self.lock:
            pending = self.pending
            if pending is None or pending.request_id != request_id:
                return False
            self.pending = None
            pending.result = result
            op = pending.operation_id
            self.set_status("running", op)
            self.emit(
                "tool_result", op, requestId=request_id, toolName=pending.tool_name, result=result
            )
            pending.done.set()
            return True

    def owns_tool_request(self, request_id: str) -> bool:
        with self.lock:
            return self.pending is not None and self.pending.request_id == request_id


def _wait(done: threading.Event, stop: threading.Event, timeout: float) -> bool:
    """Wait for `done`, giving up early when the Core stops; True when `done` is set."""
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if done.wait(min(0.05, remaining)):
            return True
    return done.is_set()
