"""What every operating system's peer check shares (docs/security.md): the stable words
of a refusal and of a passed check, the refusal itself, the two ends of a connection, how
a socket record is matched to them, and what happens when nothing can be checked.

Written with `errno` and `_socket` only (the built-in, the same on every system, not the
`socket` wrapper, whose enums cost a cold start more than the check): this runs on every
request, including the cold start of a host that answers one `ping`.
"""

from __future__ import annotations

import _socket
import errno

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# --- why a Core was refused (stable words: logs, error details and `doctor`) ------------
FOREIGN_OWNER = "foreign_owner"
NOT_CORE_PROCESS = "not_core_process"
UNVERIFIABLE = "unverifiable"
CONNECTION_GONE = "connection_gone"
RESOURCES = "resources_exhausted"

_EXPLANATIONS = {
    FOREIGN_OWNER: "the program listening on the Core's port belongs to another user",
    NOT_CORE_PROCESS: "the program listening on the Core's port is not the process "
    "runtime.json names",
    UNVERIFIABLE: "this system does not let the host check who listens on the Core's port",
    CONNECTION_GONE: "the connection closed before the host could check who answered",
    RESOURCES: "the host is out of file descriptors and could not check who answered",
}

# --- how far a passed check went (the first word of `verify_core_peer`'s answer) -------
USER_AND_PID = "user+pid"
"""The server end belongs to the user and the runtime.json process holds it."""
USER_ONLY = "user"
"""The server end belongs to the user; which process holds it could not be checked."""
NOTHING = "none"
"""Nothing could be checked and the user opted out (`checkRuntimePid: false`)."""

RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
V4_MAPPED_PREFIX = b"\0" * 10 + b"\xff\xff"


class PeerRefusedError(Exception):
    """A Core connection the host will not write to: `reason` is one of the stable words
    above, `detail` says what was seen (ids, numbers; never anything the page sent)."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(self.explanation)

    @property
    def explanation(self) -> str:
        """`<why>: <what was seen>`, for the log and `doctor`."""
        return f"{_EXPLANATIONS.get(self.reason, self.reason)}: {self.detail}"


class ConnectionEnds:
    """One TCP connection as its server sees it: `server_*` is our peer, `client_*` us.
    Addresses are packed; an IPv4-mapped IPv6 address is kept as its 4 IPv4 bytes."""

    __slots__ = ("client_ip", "client_port", "server_ip", "server_port")

    def __init__(
        self, server_ip: bytes, server_port: int, client_ip: bytes, client_port: int
    ) -> None:
        self.server_ip = server_ip
        self.server_port = server_port
        self.client_ip = client_ip
        self.client_port = client_port

    @classmethod
    def of(cls, sock: _socket.socket) -> ConnectionEnds:
        """The ends of a connected socket (OSError when it is not connected)."""
        peer = sock.getpeername()
        here = sock.getsockname()
        family = sock.family
        return cls(
            plain_ip(_socket.inet_pton(family, peer[0])),
            peer[1],
            plain_ip(_socket.inet_pton(family, here[0])),
            here[1],
        )

    @property
    def where(self) -> str:
        """The Core's address as the user would write it (for messages)."""
        family = _socket.AF_INET if len(self.server_ip) == 4 else _socket.AF_INET6
        return f"{_socket.inet_ntop(family, self.server_ip)}:{self.server_port}"


class TcpEnd:
    """One socket as the OS reports it. `owner` is a uid (Linux, macOS) or a pid
    (Windows); `inode` is 0 where the OS has none (or for a connection not accepted
    yet)."""

    __slots__ = ("inode", "local_ip", "local_port", "owner", "remote_ip", "remote_port", "state")

    def __init__(
        self,
        local_ip: bytes,
        local_port: int,
        remote_ip: bytes,
        remote_port: int,
        state: int,
        owner: int,
        inode: int = 0,
    ) -> None:
        self.local_ip = local_ip
        self.local_port = local_port
        self.remote_ip = remote_ip
        self.remote_port = remote_port
        self.state = state
        self.owner = owner
        self.inode = inode

    def __repr__(self) -> str:
        return (
            f"TcpEnd({self.local_ip.hex()}:{self.local_port} -> {self.remote_ip.hex()}:"
            f"{self.remote_port} state={self.state} owner={self.owner} inode={self.inode})"
        )


def plain_ip(raw: bytes) -> bytes:
    """An IPv4-mapped IPv6 address as its IPv4 bytes; any other address unchanged, so a
    dual-stack server and an IPv4 client compare equal."""
    return raw[12:] if len(raw) == 16 and raw[:12] == V4_MAPPED_PREFIX else raw


def is_server_end(end: TcpEnd, ends: ConnectionEnds) -> bool:
    """`end` is the server's side of exactly this connection."""
    return (
        end.local_port == ends.server_port
        and end.remote_port == ends.client_port
        and plain_ip(end.local_ip) == ends.server_ip
        and plain_ip(end.remote_ip) == ends.client_ip
    )


def is_listener_for(end: TcpEnd, ends: ConnectionEnds, listen_state: int) -> bool:
    """`end` is a listener that accepts connections to the server's address and port:
    bound to that address, or to a wildcard of its family or of IPv6 (dual-stack)."""
    if end.state != listen_state or end.local_port != ends.server_port:
        return False
    ip = plain_ip(end.local_ip)
    return ip == ends.server_ip or (not any(ip) and len(ip) in (len(ends.server_ip), 16))


def pick_server_end(
    records: Iterable[TcpEnd], ends: ConnectionEnds, listen_state: int
) -> tuple[TcpEnd, str] | None:
    """The record of this connection's server end, else of the listener whose queue holds
    it (the connection is not accepted yet), with which one it was; None if neither."""
    listener = None
    for end in records:
        if is_server_end(end, ends):
            return end, "connection"
        if listener is None and is_listener_for(end, ends, listen_state):
            listener = end
    return None if listener is None else (listener, "listener")


def refuse_os_error(exc: OSError, what: str) -> PeerRefusedError:
    """An OS error met while checking: out of resources, or nothing could be checked."""
    if exc.errno in RESOURCE_ERRNOS:
        return PeerRefusedError(RESOURCES, f"{what}: {exc.strerror or exc}")
    return PeerRefusedError(UNVERIFIABLE, f"{what}: {exc.strerror or exc}")


def blind(ends: ConnectionEnds, check_pid: bool, why: str) -> str:
    """Nothing about the server end could be learnt: refuse, unless the user opted out."""
    if check_pid:
        raise PeerRefusedError(UNVERIFIABLE, f"{ends.where}: {why}")
    return f"{NOTHING}: not verified (checkRuntimePid is false): {why}"
