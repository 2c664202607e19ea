"""The demo's transcript: one aligned row per request, response and event, or the
record itself as one JSON line (`--json`)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from native_host.demo.session import (
    LOG_TAIL_LINES,
    TOOL_NAME,
    Frame,
    Record,
    compact,
    error_of,
    shorten,
)

DETAIL_WIDTH = 60
"""The details column is cut to this many characters."""


def json_line(record: Record) -> str:
    """The `--json` form of a record: compact, one line."""
    return json.dumps(record, separators=(",", ":"))


def request_detail(message: Frame) -> str:
    kind = message["type"]
    if kind == "create_thread":
        return f"{message['provider']}, tool {TOOL_NAME}, {message['callerOrigin']}"
    if kind == "send_text":
        return json.dumps(message["message"])
    if kind == "submit_tool_result":
        return f"{message['toolRequestId']} -> {compact(message['result'])}"
    if "threadId" in message:
        return f"thread {message['threadId']}"
    return ""


def response_detail(request_type: str, frame: Frame) -> str:
    result = frame.get("result")
    if frame.get("ok") is not True:
        error = error_of(frame)
        return f"{error.get('code')}: {error.get('message')}"
    if not isinstance(result, dict):
        if request_type == "list_providers" and isinstance(result, list):
            available = [
                str(p.get("code")) for p in result if isinstance(p, dict) and p.get("available")
            ]
            return f"{len(result)} providers, available: {', '.join(available) or 'none'}"
        return compact(result)
    if request_type == "ping":
        version = result.get("version")
        return "connected" + (f", Core {version}" if version else "")
    if request_type == "get_settings":
        return f"default provider {result.get('defaultProvider') or 'none'}"
    if request_type == "create_thread":
        workspace = result.get("workspaceId")
        return f"thread {result.get('threadId')}" + (
            f", workspace {workspace}" if workspace else ""
        )
    if request_type == "subscribe_thread":
        snapshot = result.get("snapshot")
        if isinstance(snapshot, dict):
            return (
                f"subscribed, snapshot {snapshot.get('status')} at seq {snapshot.get('latestSeq')}"
            )
        return "subscribed"
    if request_type == "send_text":
        operation = result.get("operationId")
        return "turn started" + (f", operation {operation}" if operation else "")
    return "accepted" if result == {} else compact(result)


def event_detail(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "status_changed":
        return str(event.get("status"))
    if kind in ("assistant_delta", "assistant_message"):
        return json.dumps(event.get("text"))
    if kind == "tool_call":
        return f"{event.get('toolName')} {compact(event.get('args'))}, id {event.get('requestId')}"
    if kind == "tool_result":
        return f"{event.get('toolName')} -> {compact(event.get('result'))}"
    if kind == "usage_updated":
        return f"{event.get('totalTokens')} tokens so far"
    if kind == "operation_completed":
        outcome = "success" if event.get("success") else "failed"
        return f"{event.get('operationKind')} {event.get('operationId')}, {outcome}"
    if kind == "provider_command_started":
        return f"{event.get('program')}, pid {event.get('processId')}"
    if kind == "error":
        error = error_of(event)
        return f"{error.get('code')}: {error.get('message')}"
    return ""


def row(ms: Any, step: str, arrow: str, label: str, ref: str = "", detail: str = "") -> str:
    """One aligned transcript line."""
    line = f"{ms:>6}  {step:<18} {arrow} {label:<24} {ref:<8} {shorten(detail, DETAIL_WIDTH)}"
    return line.rstrip()


class Transcript:
    """The human transcript: one aligned row per request, response and event."""

    def __init__(self) -> None:
        self.shown_step: object = None

    def lines(self, record: Record) -> list[str]:
        kind = record["kind"]
        ms = record.get("tMs", "")
        if kind == "start":
            return [
                f"Pedelec native host demo (generation {record['generation']})",
                f"  temp dir  {record['tempDir']} (removed at the end)",
                f"  dev Core  {record['core']}",
                f"  host      {shlex.join(record['host'])} (pid {record['hostPid']})",
                f"  page      {record['origin']}",
                "",
                row("ms", "step", "  ", "message", "ref", "details"),
            ]
        if kind == "request":
            message = record["message"]
            step = (
                ""
                if record["step"] == self.shown_step
                else f"{record['step']} {record['stepName']}"
            )
            self.shown_step = record["step"]
            return [
                row(ms, step, "->", message["type"], record["requestId"], request_detail(message))
            ]
        if kind == "response":
            frame = record["frame"]
            outcome = "ok" if frame.get("ok") is True else "error"
            label = f"{outcome} in {record['rttMs']} ms"
            detail = response_detail(record["requestType"], frame)
            return [row(ms, "", "<-", label, str(frame.get("requestId")), detail)]
        if kind == "event":
            event = record["event"]
            ref = f"seq {event.get('seq')}"
            return [row(ms, "", "<-", str(event.get("type")), ref, event_detail(event))]
        if kind == "frame":
            frame = record["frame"]
            return [row(ms, "", "<-", str(frame.get("type")), "", compact(frame))]
        if kind == "close_stdin":
            return [row(ms, "exit", "->", "close stdin")]
        if kind == "exit":
            return [row(ms, "", "<-", f"exit {record['status']} in {record['ms']} ms")]
        if kind == "passed":
            return ["", f"demo passed: {record['steps']} steps in {record['ms']} ms"]
        if kind == "failed":
            return failure_lines(record)
        return []


def failure_lines(record: Record) -> list[str]:
    lines = [
        "",
        f"demo failed at {record['where']} after {record['tMs']} ms",
        f"  expected: {record['expected']}",
        f"  received: {record['received']}",
    ]
    if record["hostStderr"]:
        stderr = record["hostStderr"].splitlines()[-LOG_TAIL_LINES:]
        lines += ["  host stderr (last lines):", *(f"    {x}" for x in stderr)]
    if record["hostLog"]:
        lines += ["  host log (last lines):", *(f"    {x}" for x in record["hostLog"])]
    return lines
