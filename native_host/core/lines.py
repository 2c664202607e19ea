"""Reading Core lines in bounded memory (spec 3.2, 7.8).

A line over the limit is either reported at once (a response: stop reading) or skipped
to its newline keeping only its head and tail (a stream: the stream goes on).
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket

MAX_LINE_BYTES = 1_048_576
KEEP_BYTES = 4096
_RECV = 65_536
_BIG_RECV = 262_144
"""Receive size once a line already spans a whole small receive."""


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
    """Reads newline-terminated lines from a socket with an optional deadline.

    Per line it costs one search of the new bytes and one copy: lines are taken from a
    start offset (the buffer is compacted only when a new chunk arrives), the search for
    the newline resumes where the last one stopped, a socket with no deadline keeps its
    blocking mode (no two fcntl calls per receive), and a long line is received in
    bigger chunks.
    """

    def __init__(self, sock: _socket.socket, limit: int = MAX_LINE_BYTES) -> None:
        self._sock = sock
        self._limit = limit
        self._buffer = bytearray()
        self._start = 0
        """Where the unread bytes begin in `_buffer`."""
        self._scanned = 0
        """How far past `_start` the buffer is known to hold no newline."""
        self._eof = False
        self._blocking = False

    def _recv(self, deadline: float | None) -> bytes:
        if deadline is None:
            if not self._blocking:
                self._sock.settimeout(None)
                self._blocking = True
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LineTimeoutError
            self._sock.settimeout(remaining)
            self._blocking = False
        pending = len(self._buffer) - self._start
        try:
            return self._sock.recv(_RECV if pending < _RECV else _BIG_RECV)
        except TimeoutError:
            raise LineTimeoutError from None

    def _append(self, chunk: bytes) -> None:
        """Add received bytes, first dropping what was already read."""
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += chunk

    def _take(self, end: int, skip: int) -> bytes:
        """The unread bytes up to `end`, then skip `skip` more (the newline)."""
        with memoryview(self._buffer) as view:  # one copy (a bytearray slice is another)
            line = view[self._start : end].tobytes()
        self._start = end + skip
        self._scanned = 0
        if self._start >= len(self._buffer):
            self._buffer.clear()
            self._start = 0
        return line

    def has_line(self) -> bool:
        """Whether a whole line is already buffered, so `read_line` will not wait."""
        newline = self._buffer.find(b"\n", self._start + self._scanned)
        if newline == -1:
            self._scanned = len(self._buffer) - self._start
            return False
        return True

    def read_line(
        self, deadline: float | None = None, skip_oversize: bool = False
    ) -> bytes | OversizeLine | None:
        """The next line without its newline (and trailing CR), an OversizeLine, or None at EOF.

        An unterminated last line before EOF still counts as a line. With
        `skip_oversize`, an over-long line is consumed up to its newline; EOF inside it
        returns None (the stream closed).
        """
        while True:
            newline = self._buffer.find(b"\n", self._start + self._scanned)
            if newline != -1:
                if newline - self._start > self._limit:
                    return self._take_oversize(newline)
                line = self._take(newline, 1)
                return line[:-1] if line.endswith(b"\r") else line
            pending = len(self._buffer) - self._start
            self._scanned = pending
            if pending > self._limit:
                if not skip_oversize:
                    head = bytes(self._buffer[self._start : self._start + KEEP_BYTES])
                    return OversizeLine(pending, head, b"")
                return self._skip_oversize(deadline)
            if self._eof:
                if not pending:
                    return None
                line = self._take(len(self._buffer), 0)
                return line[:-1] if line.endswith(b"\r") else line
            chunk = self._recv(deadline)
            if not chunk:
                self._eof = True
            else:
                self._append(chunk)

    def _take_oversize(self, newline: int) -> OversizeLine:
        end = newline - 1 if self._buffer[newline - 1] == 0x0D else newline  # a CR before LF
        head = bytes(self._buffer[self._start : self._start + KEEP_BYTES])
        tail = bytes(self._buffer[max(self._start, end - KEEP_BYTES) : end])
        size = end - self._start
        self._take(newline, 1)
        return OversizeLine(size, head, tail)

    def _skip_oversize(self, deadline: float | None) -> OversizeLine | None:
        pending = self._buffer[self._start :]
        head = bytes(pending[:KEEP_BYTES])
        size = len(pending)
        tail = bytes(pending[-KEEP_BYTES:])
        self._buffer.clear()
        self._start = 0
        self._scanned = 0
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
