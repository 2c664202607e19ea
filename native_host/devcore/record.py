"""The request record: every line the dev Core received, so tests can assert what a client sent."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class RecordedRequest:
    """One received line. Unparseable lines have `envelope` None; oversize ones `oversize` True."""

    connection_id: int
    raw: str
    """The line as received, without its newline (empty for an oversize line)."""
    envelope: dict[str, Any] | None
    type: str | None
    request_id: str | None
    caller_origin: str | None
    caller_sdk_version: str | None
    payload: Any
    received_at: float
    size_bytes: int
    oversize: bool = False

    @classmethod
    def from_line(
        cls, connection_id: int, line: bytes, received_at: float, *, oversize_bytes: int = 0
    ) -> RecordedRequest:
        """Parse what can be parsed; a line that is not a JSON object records only `raw`."""
        oversize = oversize_bytes > 0
        envelope: dict[str, Any] | None = None
        if not oversize:
            try:
                parsed = json.loads(line)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                envelope = parsed
        env = envelope or {}

        def text(key: str) -> str | None:
            value = env.get(key)
            return value if isinstance(value, str) else None

        return cls(
            connection_id=connection_id,
            raw="" if oversize else line.decode("utf-8", errors="replace"),
            envelope=envelope,
            type=text("type"),
            request_id=text("requestId"),
            caller_origin=text("callerOrigin"),
            caller_sdk_version=text("callerSdkVersion"),
            payload=env.get("payload"),
            received_at=received_at,
            size_bytes=oversize_bytes or len(line),
            oversize=oversize,
        )

    def to_json(self) -> dict[str, Any]:
        """The camelCase form written to the `--record` file."""
        return {to_camel(key): value for key, value in asdict(self).items()}


class Recorder:
    """Thread-safe, append-only record; optionally mirrored to a JSON-lines file."""

    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []
        self._path = path

    def add(self, item: RecordedRequest) -> None:
        """Append in arrival order; the file line is flushed at once for subprocess tests."""
        with self._lock:
            self._items.append(item)
            if self._path is not None:
                line = json.dumps(item.to_json(), ensure_ascii=False, separators=(",", ":"))
                with self._path.open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")

    def snapshot(self) -> list[RecordedRequest]:
        """A copy, safe to iterate while the Core keeps recording."""
        with self._lock:
            return list(self._items)
