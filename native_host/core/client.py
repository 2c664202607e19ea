"""Request/response exchanges with the Core: one connection per in-flight request (spec 3.3).

Everything before the first byte is written raises `CoreUnreachableError` (a launch
and one re-attempt may follow, spec 7.5); everything after raises `HostError`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from native_host import errors
from native_host.core.discovery import CoreEndpoint, CoreUnreachableError, read_runtime
from native_host.core.lines import MAX_LINE_BYTES, LineReader, LineTimeoutError, OversizeLine
from native_host.errors import HostError

log = logging.getLogger(__name__)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not valid JSON")


def parse_json(data: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity (spec 0.3 rule 7).

    Every failure, including nesting too deep for the parser, is a ValueError.
    """
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("JSON nesting is too deep") from None


def encode_line(envelope: dict[str, Any]) -> bytes:
    """A Core line without its newline."""
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def response_shape_error(response: Any) -> str | None:
    """Why a Core reply is not a valid response envelope (spec 7.2), or None."""
    if not isinstance(response, dict):
        return "response is not a JSON object"
    if not isinstance(response.get("requestId"), str):
        return "requestId is not a string"
    ok = response.get("ok")
    if not isinstance(ok, bool):
        return "ok is not a boolean"
    if ok and "result" not in response:
        return "ok response has no result"
    if not ok:
        error = response.get("error")
        if not (
            isinstance(error, dict)
            and isinstance(error.get("code"), str)
            and isinstance(error.get("message"), str)
        ):
            return "error response has no error object with string code and message"
    return None


class ConnectionRegistry:
    """Every open Core socket, so shutdown can close them all at once (spec 7.13)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            if self._closed:
                sock.close()
                raise OSError("host is shutting down")
            self._sockets.add(sock)

    def discard(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        close_socket(sock)

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            close_socket(sock)


def close_socket(sock: socket.socket) -> None:
    """Shut down and close, waking any thread blocked in recv; never raises."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class CoreClient:
    """Opens Core connections found through `runtime.json` and runs exchanges on them."""

    def __init__(
        self,
        home: Path | None,
        connect_timeout_ms: int,
        check_runtime_pid: bool,
        registry: ConnectionRegistry,
    ) -> None:
        self.home = home
        self.connect_timeout_ms = connect_timeout_ms
        self.check_runtime_pid = check_runtime_pid
        self.registry = registry

    def discover(self) -> CoreEndpoint:
        """The Core's endpoint from `runtime.json` (no home at all is not launchable)."""
        if self.home is None:
            raise HostError(
                errors.IPC_UNAVAILABLE, errors.MSG_HOME_UNRESOLVABLE, errors.STAGE_DISCOVER_CORE
            )
        return read_runtime(self.home, check_pid=self.check_runtime_pid)

    def connect(
        self, endpoint: CoreEndpoint | None = None, timeout_s: float | None = None
    ) -> socket.socket:
        """Connect to the Core (discovering it unless given); raises CoreUnreachableError."""
        target = endpoint or self.discover()
        limit = self.connect_timeout_ms / 1000
        timeout = limit if timeout_s is None else max(0.001, min(limit, timeout_s))
        try:
            sock = socket.create_connection((target.host, target.port), timeout=timeout)
        except OSError as exc:
            raise CoreUnreachableError(
                errors.STAGE_CONNECT_CORE, endpoint=target.endpoint, error=str(exc) or repr(exc)
            ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.registry.add(sock)
        except OSError as exc:
            raise CoreUnreachableError(
                errors.STAGE_CONNECT_CORE, endpoint=target.endpoint, error=str(exc)
            ) from None
        return sock

    def exchange(
        self,
        sock: socket.socket,
        line: bytes,
        timeout_ms: int | None,
        stage: str = errors.STAGE_AWAIT_CORE_RESPONSE,
    ) -> dict[str, Any]:
        """Write one request line and read its response; always closes the socket.

        Returns the validated response object. Never retried: the request may have
        reached the Core (spec 7.5).
        """
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        try:
            try:
                sock.settimeout(None if timeout_ms is None else timeout_ms / 1000)
                sock.sendall(line + b"\n")
            except TimeoutError:
                raise _timeout(stage, timeout_ms) from None
            except OSError as exc:
                raise HostError(
                    errors.CORE_RUNTIME_UNAVAILABLE,
                    errors.MSG_APP_NOT_RUNNING,
                    errors.STAGE_SEND_REQUEST if stage != errors.STAGE_SUBSCRIBE else stage,
                    error=str(exc),
                ) from None
            return read_response(LineReader(sock), deadline, timeout_ms, stage)
        finally:
            self.registry.discard(sock)


def _timeout(stage: str, timeout_ms: int | None) -> HostError:
    return HostError(
        errors.IPC_UNAVAILABLE, errors.MSG_RESPONSE_TIMED_OUT, stage, timeoutMs=timeout_ms
    )


def read_response(
    reader: LineReader,
    deadline: float | None,
    timeout_ms: int | None,
    stage: str,
    on_other_line: Callable[[Any], bool] | None = None,
) -> dict[str, Any]:
    """Read lines until a response envelope arrives and validate it (spec 7.2, 7.8).

    `on_other_line` sees every parsed line that is not a response (a subscription's
    early events); it returns False to reject the line.
    """
    while True:
        try:
            line = reader.read_line(deadline)
        except LineTimeoutError:
            raise _timeout(stage, timeout_ms) from None
        except OSError as exc:
            raise HostError(
                errors.CORE_RUNTIME_UNAVAILABLE, errors.MSG_APP_NOT_RUNNING, stage, error=str(exc)
            ) from None
        if line is None:
            raise HostError(
                errors.CORE_RUNTIME_UNAVAILABLE,
                errors.MSG_APP_NOT_RUNNING,
                stage,
                error=errors.MSG_CONNECTION_CLOSED,
            )
        if isinstance(line, OversizeLine):
            raise HostError(
                errors.MESSAGE_TOO_LARGE,
                errors.MSG_CORE_LINE_TOO_LARGE,
                stage,
                limitBytes=MAX_LINE_BYTES,
            )
        not_json = (
            errors.MSG_SUBSCRIBE_NOT_JSON
            if on_other_line is not None
            else errors.MSG_RESPONSE_NOT_JSON
        )
        try:
            response = parse_json(line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HostError(errors.IPC_UNAVAILABLE, not_json, stage, error=str(exc)) from None
        if on_other_line is not None and not (
            isinstance(response, dict) and isinstance(response.get("ok"), bool)
        ):
            if on_other_line(response):
                continue
            raise HostError(
                errors.IPC_UNAVAILABLE,
                not_json,
                stage,
                error="first line was neither a response nor a thread event",
            )
        problem = response_shape_error(response)
        if problem is not None:
            raise HostError(
                errors.IPC_UNAVAILABLE, errors.MSG_RESPONSE_BAD_SHAPE, stage, error=problem
            )
        return dict(response)
