"""Finding the Core: `runtime.json` in the Pedelec home (spec 3.1, 7.14 step 4).

A failure here happens before any byte of a request is written, so it may trigger a
background launch and one re-attempt (spec 7.5).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from native_host import errors
from native_host.errors import HostError

log = logging.getLogger(__name__)

PROTOCOL = "pedelec-core-ipc-v1"
_ENDPOINT_RE = re.compile(r"127\.0\.0\.1:(\d{1,5})")


class CoreEndpoint(NamedTuple):
    """Where a Core said it listens."""

    port: int
    pid: int
    host: str = "127.0.0.1"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


class CoreUnreachableError(Exception):
    """The Core could not be reached before anything was sent (launch may help)."""

    def __init__(self, stage: str, **details: Any) -> None:
        super().__init__(f"{stage}: {details}")
        self.stage = stage
        self.details = details

    def to_host_error(self) -> HostError:
        return HostError(
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
    except PermissionError:
        return True
    except OSError:
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


def parse_runtime(raw: str) -> CoreEndpoint:
    """Validate the text of `runtime.json`; raise CoreUnreachableError saying why not."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _discover_error(f"runtime.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _discover_error("runtime.json is not a JSON object")
    if data.get("protocol") != PROTOCOL:
        raise _discover_error(f"runtime.json protocol is not {PROTOCOL}")
    if data.get("host") != "127.0.0.1":
        raise _discover_error("runtime.json host is not 127.0.0.1")
    endpoint = data.get("endpoint")
    match = _ENDPOINT_RE.fullmatch(endpoint) if isinstance(endpoint, str) else None
    if match is None or not 1 <= int(match.group(1)) <= 65535:
        raise _discover_error("runtime.json endpoint is not 127.0.0.1:<1-65535>")
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise _discover_error("runtime.json pid is not a positive integer")
    port = int(match.group(1))
    if data.get("port") != port:
        log.info(
            "runtime.json port %r disagrees with endpoint %s; using the endpoint",
            data.get("port"),
            endpoint,
        )
    return CoreEndpoint(port=port, pid=pid)


def read_runtime(home: Path, check_pid: bool = True) -> CoreEndpoint:
    """Read and validate `runtime.json`; a stale one (dead pid) is unreachable."""
    path = home / "runtime.json"
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _discover_error("runtime.json not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _discover_error(f"cannot read runtime.json: {exc}") from None
    endpoint = parse_runtime(raw)
    if check_pid and not pid_alive(endpoint.pid):
        raise _discover_error(f"runtime.json is stale: pid {endpoint.pid} is not running")
    return endpoint
