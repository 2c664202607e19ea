"""Know who answers before writing a byte: the Core's identity (docs/security.md).

The Core has no authentication and `runtime.json` outlives it, so while the Desktop is
down any local user can bind its port and receive the user's prompts. Every Core
connection is therefore checked right after `connect()` and before its first byte: the
*server end of this very connection* must belong to the user and be held by the process
`runtime.json` names.

How each operating system tells who holds a socket lives in its own module, and a host
imports only its own system's:

- `linux`: one sock_diag netlink lookup by exact 4-tuple (or `/proc/net/tcp[6]`), then
  `/proc/<pid>/fd`;
- `windows`: the owning pid from `GetExtendedTcpTable`, and that process's user SID;
- `macos`: libproc's list of the `runtime.json` pid's sockets.

What they share (the stable words, the refusal, the connection's ends, the rule when
nothing can be checked) is in `rule`. Only the Linux path runs in the project's Linux
suites; the Windows path runs on the Windows lane (Wine), the macOS path only through
injected records.
"""

from __future__ import annotations

import sys

from native_host.core.peer.rule import (
    CONNECTION_GONE,
    FOREIGN_OWNER,
    NOT_CORE_PROCESS,
    NOTHING,
    RESOURCES,
    UNVERIFIABLE,
    USER_AND_PID,
    USER_ONLY,
    ConnectionEnds,
    PeerRefusedError,
    blind,
    refuse_os_error,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    from collections.abc import Callable

__all__ = [
    "CONNECTION_GONE",
    "FOREIGN_OWNER",
    "NOTHING",
    "NOT_CORE_PROCESS",
    "RESOURCES",
    "UNVERIFIABLE",
    "USER_AND_PID",
    "USER_ONLY",
    "PeerRefusedError",
    "verify_core_peer",
]


# The running system's check, imported with this package (at start, in one thread): an
# import in a request thread can fail for want of a descriptor, and then every request
# of that start would crash. The other systems' modules are never imported.
_verify_system: Callable[[ConnectionEnds, int, bool], str] | None = None
if sys.platform == "linux":
    from native_host.core.peer.linux import verify as _verify_system
elif sys.platform == "win32":
    from native_host.core.peer.windows import verify as _verify_system
elif sys.platform == "darwin":
    from native_host.core.peer.macos import verify as _verify_system


def _verify_here(ends: ConnectionEnds, expected_pid: int, check_pid: bool) -> str:
    if _verify_system is None:
        return blind(ends, check_pid, f"no way to identify a socket's owner on {sys.platform}")
    return _verify_system(ends, expected_pid, check_pid)


def verify_core_peer(sock: _socket.socket, expected_pid: int, check_pid: bool = True) -> str:
    """Check that the server end of `sock` (connected, nothing written yet) belongs to the
    user and is held by `expected_pid` (runtime.json's pid); raise PeerRefusedError if not.

    Returns how far the check went, for the log and `doctor`: a string whose first word
    is `user+pid`, `user` (the pid could not be checked, or `check_pid` is False) or
    `none` (nothing could be checked and `check_pid` is False), then the evidence.
    `check_pid` is the `checkRuntimePid` setting. The rule is in docs/security.md.
    """
    try:
        ends = ConnectionEnds.of(sock)
    except OSError as exc:
        raise PeerRefusedError(CONNECTION_GONE, f"the socket is not connected: {exc}") from None
    try:
        return _verify_here(ends, expected_pid, check_pid)
    except OSError as exc:
        raise refuse_os_error(exc, ends.where) from None
    except ValueError as exc:  # a table or record the parsers do not understand
        raise PeerRefusedError(UNVERIFIABLE, f"{ends.where}: {exc}") from None
