"""Run the host exactly as Chrome does: a subprocess with the extension origin as its
argument, talking length-prefixed JSON over its stdin and stdout.

One way to run the host, shared by the test suite, the demo and `doctor`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from native_host import OFFICIAL_EXTENSION_ID
from native_host.codec import MAX_DEPTH, too_deep
from native_host.codec import encode as encode_message
from native_host.framing import MAX_FRAME_BYTES

OFFICIAL_ORIGIN = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
_PREFIX = struct.Struct("<I")


def default_host_command() -> list[str]:
    """This very host: the interpreter running us with the package, or, in a frozen
    bundle, the bundle's own executable (it has no `-m`)."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "native_host"]


class HostProtocolError(AssertionError):
    """The host broke the native messaging contract (bad frame, oversize frame, ...)."""


class HostExitedError(EOFError):
    """The host stopped reading its stdin (it exited, or closed it) before a write."""


class HostProcess:
    """A running host process and the frames it has written."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        args: Sequence[str] = (OFFICIAL_ORIGIN,),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.command = [*(command or default_host_command()), *args]
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.protocol_errors: list[str] = []
        self.stderr_chunks: list[bytes] = []
        self._stdin_lock = threading.Lock()
        self._peeked: list[dict[str, Any] | None] = []
        """Frames read ahead (by `response`) and not yet taken; None once stdout ended."""
        self.history: list[dict[str, Any]] = []
        """Every frame taken from the host's stdout so far, in order."""
        self._stdout_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._stdout_reader.start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    # --- reading -------------------------------------------------------------------
    def _read_stdout(self) -> None:
        """Frames until EOF or the first broken one: like Chrome, stop at a frame that
        breaks the contract (an oversize length is not even read, so garbage on stdout
        is reported at once instead of waiting for gigabytes that never come; a frame
        nested past codec.MAX_DEPTH is one Chromium's JSON reader refuses)."""
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            prefix = stdout.read(4)
            if len(prefix) < 4:
                if prefix:
                    self.protocol_errors.append(f"stray {len(prefix)} bytes at end of stdout")
                break
            (size,) = _PREFIX.unpack(prefix)
            if size > MAX_FRAME_BYTES:
                self.protocol_errors.append(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
                break
            body = stdout.read(size)
            if len(body) < size:
                self.protocol_errors.append("stdout ended inside a frame")
                break
            try:
                message = json.loads(body.decode("utf-8"))
            except ValueError as exc:
                self.protocol_errors.append(f"frame is not UTF-8 JSON: {exc}")
                break
            if too_deep(message, body):
                self.protocol_errors.append(f"frame nests deeper than {MAX_DEPTH} levels")
                break
            self.frames.put(message)
        self.frames.put(None)

    def _read_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        for chunk in iter(lambda: stderr.read(4096), b""):
            self.stderr_chunks.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode("utf-8", errors="replace")

    def final_stderr(self, timeout: float = 1.0) -> str:
        """Everything the host wrote to stderr, once it has closed it (or `timeout` passed)."""
        self._stderr_reader.join(timeout)
        return self.stderr

    def check_protocol(self) -> None:
        """Raise if the host ever wrote something the browser would reject."""
        if self.protocol_errors:
            raise HostProtocolError("; ".join(self.protocol_errors))

    def read(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next frame; raises if none arrives in time or the host closed stdout."""
        try:
            message = self._next(timeout)
        except queue.Empty:
            raise TimeoutError(f"no frame from the host within {timeout} s") from None
        if message is None:
            self._peeked.append(None)
            self.check_protocol()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(1.0)  # its exit status says how it ended (-15: SIGTERM)
            raise EOFError(
                f"host closed stdout (exit {self.proc.poll()}); stderr: {self.final_stderr()}"
            )
        self.check_protocol()
        return message

    def read_until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read frames until one matches; returns it and the frames skipped on the way."""
        deadline = time.monotonic() + timeout
        skipped: list[dict[str, Any]] = []
        while True:
            message = self.read(max(0.01, deadline - time.monotonic()))
            if predicate(message):
                return message, skipped
            skipped.append(message)

    def response(self, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """Read until the response with this requestId; frames on the way are kept for
        later reads, in order."""
        message, skipped = self.read_until(
            lambda m: m.get("type") == "response" and m.get("requestId") == request_id, timeout
        )
        self._peeked[0:0] = skipped
        return message

    def _next(self, timeout: float) -> dict[str, Any] | None:
        if self._peeked:
            return self._peeked.pop(0)
        message = self.frames.get(timeout=timeout)
        if message is not None:
            self.history.append(message)
        return message

    # --- writing ------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        """Write to the host's stdin; `HostExitedError` when the host no longer reads it
        (a host that exits at once is a case to report, never a crash)."""
        stdin = self.proc.stdin
        assert stdin is not None
        with self._stdin_lock:
            try:
                stdin.write(data)
                stdin.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError) as exc:
                self._drop_stdin()
                raise HostExitedError(
                    f"host stopped reading stdin (exit {self.proc.poll()}): {exc}"
                ) from None

    def send_body(self, body: bytes) -> None:
        self.send_raw(_PREFIX.pack(len(body)) + body)

    def send(self, message: Any) -> None:
        self.send_body(encode_message(message))

    def request(self, message: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Send one request and wait for its response."""
        self.send(message)
        return self.response(str(message["requestId"]), timeout)

    # --- lifetime -------------------------------------------------------------------
    def _drop_stdin(self) -> None:
        """Close stdin after a failed write. Its buffer still holds bytes nobody will read;
        left to the garbage collector, the flush fails there and Python 3.13 prints
        "Exception ignored ... BrokenPipeError". `close` flushes (failing again) and then
        closes the pipe anyway, so it is done here, at a known time."""
        stdin = self.proc.stdin
        assert stdin is not None
        with contextlib.suppress(OSError, ValueError):
            stdin.close()

    def close_stdin(self) -> None:
        """What Chrome does when the port disconnects."""
        with self._stdin_lock:
            self._drop_stdin()

    def close(self, timeout: float = 1.0) -> None:
        """Close every pipe to a process that has exited or was killed, once its readers
        reached EOF, so none is closed (or flushed) later by the garbage collector."""
        self.close_stdin()
        for reader, pipe in (
            (self._stdout_reader, self.proc.stdout),
            (self._stderr_reader, self.proc.stderr),
        ):
            reader.join(timeout)
            if pipe is not None and not reader.is_alive():  # never under a reading thread
                pipe.close()

    def wait(self, timeout: float = 5.0) -> int:
        return self.proc.wait(timeout)

    def stop(self, grace_s: float = 5.0) -> None:
        """Leave as Chrome does: close stdin, SIGKILL a host still running `grace_s` later
        (Chrome waits about 2 s, spec 1.1)."""
        with contextlib.suppress(OSError):
            self.close_stdin()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.close()

    def __enter__(self) -> HostProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def isolated_env(base: Mapping[str, str], root: os.PathLike[str] | str) -> dict[str, str]:
    """An environment whose Pedelec home, config, state and log dirs all live under `root`."""
    root = os.fspath(root)
    env = {k: v for k, v in base.items() if not k.startswith("PEDELEC_")}
    env.update(
        {
            "PEDELEC_HOME": os.path.join(root, "pedelec-home"),
            "PEDELEC_NATIVE_HOST_CONFIG_DIR": os.path.join(root, "config"),
            "PEDELEC_NATIVE_HOST_STATE_DIR": os.path.join(root, "state"),
            "PEDELEC_NATIVE_HOST_LOG_DIR": os.path.join(root, "logs"),
        }
    )
    return env
