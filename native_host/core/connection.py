"""One Core connection: write a request line, read its response (spec 3.2, 3.3, 7.2, 7.8).

Everything here happens after the connection was opened, so every failure is a
`HostError` and nothing is ever retried (spec 7.5): the request may have reached the
Core. Opening connections, and deciding whether to launch, is the gateway's.
"""

from __future__ import annotations

import _socket
import _thread
import errno
import time

from native_host import codec, errors
from native_host.core.lines import MAX_LINE_BYTES, LineReader, LineTimeoutError, OversizeLine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from native_host.core.discovery import CoreEndpoint

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def is_resource_error(exc: OSError) -> bool:
    """Out of descriptors: not "the Core is down" (issue: a launch must not follow)."""
    return exc.errno in _RESOURCE_ERRNOS


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


def close_socket(sock: _socket.socket) -> None:
    """Shut down and close, waking any thread blocked in recv; never raises."""
    try:
        sock.shutdown(_socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class ConnectionRegistry:
    """Every open Core socket, so shutdown can close them all at once (spec 7.13)."""

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._sockets: set[_socket.socket] = set()
        self._closed = False

    def add(self, sock: _socket.socket) -> None:
        """Track a socket; OSError (and the socket closed) once shutdown has begun."""
        with self._lock:
            if self._closed:
                sock.close()
                raise OSError("host is shutting down")
            self._sockets.add(sock)

    def discard(self, sock: _socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        close_socket(sock)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sockets)

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            close_socket(sock)


def connect_socket(endpoint: CoreEndpoint, timeout_s: float) -> _socket.socket:
    """A TCP connection to the endpoint; raises OSError (the gateway decides what it means).

    A literal IPv4 address needs no resolver: `create_connection` would run getaddrinfo,
    which loads the IDNA codec (and `unicodedata`) on every host start. The built-in
    `_socket.socket` is the same object on every OS without the `socket` module's wrapper
    (enums, `selectors`: a few milliseconds of every start); nothing here uses what the
    wrapper adds (`makefile`, `with`, `dup`, enum-valued `family`).
    """
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect((endpoint.host, endpoint.port))
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def _timeout(stage: str, timeout_ms: int | None) -> errors.HostError:
    return errors.HostError(
        errors.IPC_UNAVAILABLE, errors.MSG_RESPONSE_TIMED_OUT, stage, timeoutMs=timeout_ms
    )


def _not_running(stage: str, error: str) -> errors.HostError:
    return errors.HostError(
        errors.CORE_RUNTIME_UNAVAILABLE, errors.MSG_APP_NOT_RUNNING, stage, error=error
    )


class CoreConnection:
    """An open, verified connection to the Core, owned by one request or one stream."""

    def __init__(self, sock: _socket.socket, endpoint: CoreEndpoint, registry: ConnectionRegistry):
        self.sock = sock
        self.endpoint = endpoint
        self.reader = LineReader(sock)
        self._registry = registry

    def close(self) -> None:
        self._registry.discard(self.sock)

    def send(
        self,
        line: bytes,
        deadline: float | None,
        timeout_ms: int | None,
        stages: tuple[str, str],
    ) -> None:
        """Write one request line (the first byte makes the request final: spec 7.5).

        `stages` are (write, read): a write error is reported at the first, a timeout
        (which runs from the start of the write, spec 7.3) at the second.
        """
        write_stage, read_stage = stages
        try:
            timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
            self.sock.settimeout(timeout)
            self.sock.sendall(line + b"\n")
        except TimeoutError:
            raise _timeout(read_stage, timeout_ms) from None
        except OSError as exc:
            raise _not_running(write_stage, str(exc) or repr(exc)) from None

    def read_response(
        self,
        deadline: float | None,
        timeout_ms: int | None,
        stage: str,
        on_other_line: Callable[[Any], bool] | None = None,
    ) -> dict[str, Any]:
        """Read lines until a response envelope arrives and validate it (spec 7.2, 7.8).

        `on_other_line` sees every parsed line that is not a response (a subscription's
        early events); it returns False to reject the line.
        """
        not_json = (
            errors.MSG_SUBSCRIBE_NOT_JSON
            if on_other_line is not None
            else errors.MSG_RESPONSE_NOT_JSON
        )
        while True:
            try:
                line = self.reader.read_line(deadline)
            except LineTimeoutError:
                raise _timeout(stage, timeout_ms) from None
            except OSError as exc:
                raise _not_running(stage, str(exc) or repr(exc)) from None
            if line is None:
                raise _not_running(stage, errors.MSG_CONNECTION_CLOSED)
            if isinstance(line, OversizeLine):
                raise errors.HostError(
                    errors.MESSAGE_TOO_LARGE,
                    errors.MSG_CORE_LINE_TOO_LARGE,
                    stage,
                    limitBytes=MAX_LINE_BYTES,
                )
            try:
                response = codec.decode(line)
            except codec.NestingTooDeepError:
                raise errors.HostError(
                    errors.MESSAGE_TOO_LARGE,
                    errors.MSG_CORE_LINE_TOO_DEEP,
                    stage,
                    limitDepth=codec.MAX_DEPTH,
                ) from None
            except codec.InvalidJsonError as exc:
                raise errors.HostError(
                    errors.IPC_UNAVAILABLE, not_json, stage, error=str(exc)
                ) from None
            if on_other_line is not None and not (
                isinstance(response, dict) and isinstance(response.get("ok"), bool)
            ):
                if on_other_line(response):
                    continue
                raise errors.HostError(
                    errors.IPC_UNAVAILABLE,
                    not_json,
                    stage,
                    error="first line was neither a response nor a thread event",
                )
            problem = response_shape_error(response)
            if problem is not None:
                raise errors.HostError(
                    errors.IPC_UNAVAILABLE, errors.MSG_RESPONSE_BAD_SHAPE, stage, error=problem
                )
            return dict(response)
