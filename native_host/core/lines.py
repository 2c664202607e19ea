"""Reading Core lines in bounded memory (spec 3.2, 7.8).

A line over the limit is either reported at once (a response: stop reading) or skipped
to its newline keeping only its head and tail (a stream: the stream goes on).
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket

MAX_LINE_BYTES = 1_048_576
KEEP_BYTES = 4096
_RECV = 65_536


class OversizeLine:
    """A line longer than MAX_LINE_BYTES. `size` is exact only when it was skipped."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, size: int, head: bytes, tail: bytes) -> None:
        self.size = size
        self.head = head
        self.tail = tail


class LineTimeoutError(TimeoutError):
    """No complete line before the deadline."""


class LineReader:
    """Reads newline-terminated lines from a socket with an optional deadline."""

    def __init__(self, sock: socket.socket, limit: int = MAX_LINE_BYTES) -> None:
        self._sock = sock
        self._limit = limit
        self._buffer = bytearray()
        self._eof = False

    def _recv(self, deadline: float | None) -> bytes:
        if deadline is None:
            self._sock.settimeout(None)
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LineTimeoutError
            self._sock.settimeout(remaining)
        try:
            return self._sock.recv(_RECV)
        except TimeoutError:
            raise LineTimeoutError from None

    def read_line(
        self, deadline: float | None = None, skip_oversize: bool = False
    ) -> bytes | OversizeLine | None:
        """The next line without its newline (and trailing CR), an OversizeLine, or None at EOF.

        An unterminated last line before EOF still counts as a line. With
        `skip_oversize`, an over-long line is consumed up to its newline; EOF inside it
        returns None (the stream closed).
        """
        while True:
            newline = self._buffer.find(b"\n")
            if newline != -1:
                if newline > self._limit:
                    return self._take_oversize(newline)
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(self._buffer) > self._limit:
                if not skip_oversize:
                    return OversizeLine(len(self._buffer), bytes(self._buffer[:KEEP_BYTES]), b"")
                return self._skip_oversize(deadline)
            if self._eof:
                if not self._buffer:
                    return None
                line = bytes(self._buffer)
                self._buffer.clear()
                return line[:-1] if line.endswith(b"\r") else line
            chunk = self._recv(deadline)
            if not chunk:
                self._eof = True
            else:
                self._buffer += chunk

    def _take_oversize(self, newline: int) -> OversizeLine:
        line = self._buffer[:newline]
        del self._buffer[: newline + 1]
        return OversizeLine(newline, bytes(line[:KEEP_BYTES]), bytes(line[-KEEP_BYTES:]))

    def _skip_oversize(self, deadline: float | None) -> OversizeLine | None:
        head = bytes(self._buffer[:KEEP_BYTES])
        size = len(self._buffer)
        tail = bytes(self._buffer[-KEEP_BYTES:])
        self._buffer.clear()
        while True:
            chunk = self._recv(deadline)
            if not chunk:
                self._eof = True
                return None
            newline = chunk.find(b"\n")
            if newline == -1:
                size += len(chunk)
                tail = (tail + chunk)[-KEEP_BYTES:]
                continue
            size += newline
            tail = (tail + chunk[:newline])[-KEEP_BYTES:]
            self._buffer += chunk[newline + 1 :]
            if tail.endswith(b"\r"):
                size -= 1
                tail = tail[:-1]
            return OversizeLine(size, head, tail)
