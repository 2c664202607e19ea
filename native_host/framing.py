"""Native messaging framing (spec 1.2, 7.6, 7.7, 7.12).

A frame is a little-endian u32 length followed by that many bytes of UTF-8 JSON.
`read_frame` is a pure function of a binary stream; `FrameWriter.write_body` is the one
function that writes frames to the browser.
"""

from __future__ import annotations

import _thread
import os
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import BinaryIO

MAX_FRAME_BYTES = 1_048_576
"""Largest frame body either direction may carry (Chrome's host->browser limit)."""
MAX_TRUSTED_FRAME_BYTES = 67_108_864
"""Chrome never sends more than 64 MiB; a larger prefix means the framing is lost."""
TAIL_BYTES = 4096
"""How much of a drained oversize body is kept to recover its requestId."""
MAX_RECOVERED_REQUEST_ID = 256
_DRAIN_CHUNK = 65_536
_PREFIX = struct.Struct("<I")
_WRITEV = getattr(os, "writev", None)


class OversizeFrame:
    """A frame whose declared length exceeds `MAX_FRAME_BYTES`.

    `trusted` is False when the length exceeds what Chrome can send at all: the body
    was not drained and the stream can no longer be read.
    """

    __slots__ = ("request_id", "size", "trusted")

    def __init__(self, size: int, request_id: str, trusted: bool) -> None:
        self.size = size
        self.request_id = request_id
        self.trusted = trusted


def _read_exact(stream: BinaryIO, count: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = count
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recover_request_id(tail: bytes) -> str:
    """The last `"requestId": "<string>"` in the tail of a body, or "" (spec 7.6).

    Used only for bodies that cannot be parsed whole, so `re` is imported here.
    """
    import re

    from native_host import codec

    matches = list(re.finditer(rb'"requestId"\s*:\s*("(?:[^"\\]|\\.)*")', tail))
    if not matches:
        return ""
    try:
        value = codec.decode(matches[-1].group(1))
    except codec.InvalidJsonError:
        return ""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_RECOVERED_REQUEST_ID:
        return ""
    return value


def top_level_request_id(body: bytes) -> str:
    """The requestId of a body nested too deep to parse: the last `"requestId": "<string>"`
    at the top level of the object, or "" (a nested one is the page's data, not its id).

    Strings are skipped with a regex and brackets counted between the candidates, all at
    C speed, in one pass over the body.
    """
    import re

    string = re.compile(rb'"(?:[^"\\]|\\.)*"')
    depth = 0
    position = 0
    found = ""
    for match in re.finditer(rb'"requestId"\s*:\s*("(?:[^"\\]|\\.)*")', body):
        between = string.sub(b"", body[position : match.start()])
        depth += between.count(b"{") + between.count(b"[")
        depth -= between.count(b"}") + between.count(b"]")
        position = match.end()
        if depth == 1:
            found = recover_request_id(match.group(0))  # the last one counts, as in parsing
    return found


def _drain(stream: BinaryIO, size: int) -> bytes | None:
    """Read and discard `size` bytes in bounded memory; return the last TAIL_BYTES."""
    tail = b""
    remaining = size
    while remaining:
        chunk = stream.read(min(_DRAIN_CHUNK, remaining))
        if not chunk:
            return None
        remaining -= len(chunk)
        tail = (tail + chunk)[-TAIL_BYTES:]
    return tail


def read_frame(stream: BinaryIO) -> bytes | OversizeFrame | None:
    """Read one frame body.

    Returns the body, an `OversizeFrame` (already drained when trusted), or None at
    end of input, including EOF inside a prefix or a body.
    """
    prefix = _read_exact(stream, _PREFIX.size)
    if prefix is None:
        return None
    (size,) = _PREFIX.unpack(prefix)
    if size > MAX_TRUSTED_FRAME_BYTES:
        return OversizeFrame(size=size, request_id="", trusted=False)
    if size > MAX_FRAME_BYTES:
        tail = _drain(stream, size)
        if tail is None:
            return None
        return OversizeFrame(size=size, request_id=recover_request_id(tail), trusted=True)
    return _read_exact(stream, size)


class FrameTooLargeError(ValueError):
    """Raised instead of writing a body the browser would reject."""

    def __init__(self, size: int) -> None:
        super().__init__(f"frame body of {size} bytes exceeds {MAX_FRAME_BYTES}")
        self.size = size


class FrameWriter:
    """The single writer of frames to the browser.

    Each frame is written as one contiguous prefix+body under a lock. After the first
    failed write the writer is closed, `on_broken` runs once, and later frames are
    silently dropped (the browser is gone).
    """

    def __init__(self, fd: int, on_broken: Callable[[], None] | None = None) -> None:
        self._fd = fd
        self._lock = _thread.allocate_lock()
        self._closed = False
        self._on_broken = on_broken

    def close(self) -> None:
        """Stop writing; frames sent afterwards are dropped."""
        with self._lock:
            self._closed = True

    def write_body(self, body: bytes) -> bool:
        """Write one already-encoded body. Returns False if it was not written."""
        return self.write_bodies((body,))

    def write_bodies(self, bodies: Sequence[bytes]) -> bool:
        """Write already-encoded bodies, in order and contiguously; False if they were not.

        Prefixes and bodies go out in one `writev` where there is one (no copy of a body:
        a flood of small events costs one system call per batch, not per event), and the
        rest of a partial write follows before the lock is let go.
        """
        parts: list[bytes] = []
        for body in bodies:
            if len(body) > MAX_FRAME_BYTES:
                raise FrameTooLargeError(len(body))
            parts += (_PREFIX.pack(len(body)), body)
        total = sum(map(len, parts))
        broken = False
        with self._lock:
            if self._closed:
                return False
            try:
                written = 0 if _WRITEV is None else _WRITEV(self._fd, parts)
                if written < total:
                    data = memoryview(b"".join(parts))[written:]
                    while data:
                        data = data[os.write(self._fd, data) :]
            except OSError:
                self._closed = True
                broken = True
        if broken:
            if self._on_broken is not None:
                self._on_broken()
            return False
        return True


def claim_stdout() -> int:
    """Reserve the real stdout for frames and point fd 1 and `sys.stdout` at stderr.

    Called before anything that might print, so a stray print, warning or child
    process can never corrupt the frame stream (spec 7.12). Returns the private fd.
    """
    frames_fd = os.dup(1)
    os.set_inheritable(frames_fd, False)
    try:
        os.fstat(2)  # Windows: an fd 2 without a handle behind it dup2s fine but fails here
        os.dup2(2, 1)
    except OSError:  # no stderr: an .exe host Chrome starts directly (Windows policy)
        _null_stdio()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        msvcrt.setmode(frames_fd, os.O_BINARY)
        msvcrt.setmode(0, os.O_BINARY)
        _redirect_windows_stdout_handle()
    return frames_fd


def _null_stdio() -> None:
    """Point fds 1 and 2 at the null device, for a host given no valid stderr (Chrome's
    NativeHostsExecutablesLaunchDirectly starts an .exe host without one)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _redirect_windows_stdout_handle() -> None:  # pragma: no cover - Windows only
    """STD_OUTPUT_HANDLE to stderr's handle too: what children inherit as stdout (the
    Windows bundle's built-in call, else ctypes: windows_acl.built_in_calls)."""
    import msvcrt

    from native_host.windows_acl import built_in_calls

    handle = msvcrt.get_osfhandle(2)  # type: ignore[attr-defined,unused-ignore]
    calls = built_in_calls()
    if calls is not None:
        calls.set_stdout_handle(handle)
        return
    import ctypes

    std_output_handle = -11
    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined,unused-ignore]
    kernel32.SetStdHandle(std_output_handle, ctypes.c_void_p(handle))
