"""Finding the Core: `runtime.json` in the Pedelec home (spec 3.1, 7.14 step 4).

A failure here happens before any byte of a request is written, so it may trigger a
background launch and one re-attempt (spec 7.5). The file is read through the one
trusted reader (`files.read_trusted`): a symlink, a FIFO, a huge file or one another
user owns or can write is refused like a missing one, with the reason in the details.
"""

from __future__ import annotations

import os

from native_host import codec, errors, files, logs, paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logs.get(__name__)

PROTOCOL = "pedelec-core-ipc-v1"
MAX_RUNTIME_BYTES = 65_536
"""A real runtime.json is about 150 bytes; nothing legitimate comes near this."""
_DIGITS = frozenset("0123456789")
_ENDPOINT_PREFIX = "127.0.0.1:"
MAX_PID = 4_294_967_295
"""`pid` is a u32 in the Desktop's file (spec 3.1)."""


class CoreEndpoint:
    """Where a Core said it listens, and which process it said it is."""

    __slots__ = ("host", "pid", "port")

    def __init__(self, port: int, pid: int, host: str = "127.0.0.1") -> None:
        self.port = port
        self.pid = pid
        self.host = host

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"CoreEndpoint({self.endpoint}, pid {self.pid})"


class CoreUnreachableError(Exception):
    """The Core could not be reached before anything was sent (a launch may help)."""

    def __init__(self, stage: str, **details: Any) -> None:
        super().__init__(f"{stage}: {details}")
        self.stage = stage
        self.details = details

    def to_host_error(self) -> errors.HostError:
        return errors.HostError(
            errors.CORE_RUNTIME_UNAVAILABLE, errors.MSG_APP_NOT_RUNNING, self.stage, **self.details
        )


def pid_alive(pid: int) -> bool:
    """False only when the pid is known not to exist; a permission error counts as alive."""
    if os.name == "nt":  # pragma: no cover - Windows only
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def _windows_pid_alive(pid: int) -> bool:  # pragma: no cover - Windows only
    import ctypes

    process_query_limited_information = 0x1000
    error_invalid_parameter = 87
    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(process_query_limited_information, False, pid)
    if handle:
        kernel32.CloseHandle(handle)
        return True
    return bool(kernel32.GetLastError() != error_invalid_parameter)


def _discover_error(reason: str) -> CoreUnreachableError:
    return CoreUnreachableError(errors.STAGE_DISCOVER_CORE, reason=reason)


def _endpoint_port(endpoint: object) -> int | None:
    """The port of `127.0.0.1:<1-65535>`, ASCII digits only, else None."""
    if not isinstance(endpoint, str) or not endpoint.startswith(_ENDPOINT_PREFIX):
        return None
    digits = endpoint[len(_ENDPOINT_PREFIX) :]
    if not 1 <= len(digits) <= 5 or not set(digits) <= _DIGITS:
        return None
    port = int(digits)
    return port if 1 <= port <= 65535 else None


def parse_runtime(raw: bytes | str) -> CoreEndpoint:
    """Validate the content of `runtime.json`; raise CoreUnreachableError saying why not."""
    try:
        data = codec.decode(raw.encode("utf-8") if isinstance(raw, str) else raw)
    except codec.InvalidJsonError as exc:
        raise _discover_error(f"runtime.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _discover_error("runtime.json is not a JSON object")
    if data.get("protocol") != PROTOCOL:
        raise _discover_error(f"runtime.json protocol is not {PROTOCOL}")
    if data.get("host") != "127.0.0.1":
        raise _discover_error("runtime.json host is not 127.0.0.1")
    port = _endpoint_port(data.get("endpoint"))
    if port is None:
        raise _discover_error("runtime.json endpoint is not 127.0.0.1:<1-65535>")
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= MAX_PID:
        raise _discover_error("runtime.json pid is not a positive 32-bit integer")
    if data.get("port") != port:
        log.info(
            "runtime.json port %r disagrees with endpoint %s; using the endpoint",
            data.get("port"),
            data.get("endpoint"),
        )
    return CoreEndpoint(port=port, pid=pid)


def runtime_path(home: str) -> str:
    return os.path.join(home, paths.RUNTIME_FILE)


def read_runtime(home: str | os.PathLike[str], check_pid: bool = True) -> CoreEndpoint:
    """Read and validate `runtime.json`; a refused or stale one (dead pid) is unreachable.

    Out of file descriptors is not "the Core is down" (launching would not help):
    that is a `HostError` with the resource code instead.
    """
    path = runtime_path(os.fspath(home))
    try:
        raw = files.read_trusted(path, MAX_RUNTIME_BYTES)
    except files.FileRefusedError as exc:
        if exc.reason == files.RESOURCES:
            raise errors.resources_exhausted(errors.STAGE_DISCOVER_CORE, exc.detail) from None
        if exc.reason == files.MISSING:
            raise _discover_error("runtime.json not found") from None
        raise CoreUnreachableError(
            errors.STAGE_DISCOVER_CORE,
            reason=f"runtime.json refused: {exc.explanation}",
            violation=exc.reason,
        ) from None
    endpoint = parse_runtime(raw)
    if check_pid and not pid_alive(endpoint.pid):
        raise _discover_error(f"runtime.json is stale: pid {endpoint.pid} is not running")
    return endpoint
