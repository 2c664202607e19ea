"""Core IPC line format (spec 3.2, 3.5): compact sorted JSON lines with a 1 MiB input limit."""

from __future__ import annotations

import json
import socket
from typing import Any

MAX_LINE_BYTES = 1_048_576
"""Core's `MAX_CORE_IPC_MESSAGE_BYTES`: the longest request line, excluding the newline."""
PROTOCOL = "pedelec-core-ipc-v1"
_CHUNK = 65_536


class CoreError(Exception):
    """A Core error reply: `{"code","message","details"?}`."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        """The error object; `details` is omitted when there are none (spec 0.3 rule 3)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return error


def dumps(obj: Any) -> bytes:
    """Serialise like the real Core: compact, keys sorted, non-ASCII written literally."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def ok_response(request_id: str, result: Any) -> dict[str, Any]:
    """A successful response envelope."""
    return {"requestId": request_id, "ok": True, "result": result}


def error_response(request_id: str, error: CoreError) -> dict[str, Any]:
    """A failed response envelope."""
    return {"requestId": request_id, "ok": False, "error": error.to_json()}


class LineTooLong(Exception):
    """A request line exceeded `MAX_LINE_BYTES`; `seen` is how many bytes were read by then."""

    def __init__(self, seen: int) -> None:
        super().__init__(f"line exceeds {MAX_LINE_BYTES} bytes")
        self.seen = seen


class LineReader:
    """Reads `\\n`-terminated lines from a socket in bounded memory.

    A trailing `\\r` is dropped; a final unterminated line before EOF still counts (spec 3.2).
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = bytearray()
        self._eof = False

    def read_line(self) -> bytes | None:
        """The next line without its terminator, or None at EOF. Raises LineTooLong."""
        while True:
            index = self._buf.find(b"\n")
            if index >= 0:
                line = bytes(self._buf[:index])
                del self._buf[: index + 1]
                return self._check(line)
            if len(self._buf) > MAX_LINE_BYTES + 1:
                raise LineTooLong(len(self._buf))
            if self._eof:
                if not self._buf:
                    return None
                line = bytes(self._buf)
                self._buf.clear()
                return self._check(line)
            chunk = self._sock.recv(_CHUNK)
            if not chunk:
                self._eof = True
            self._buf += chunk

    @staticmethod
    def _check(line: bytes) -> bytes:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > MAX_LINE_BYTES:
            raise LineTooLong(len(line))
        return line
