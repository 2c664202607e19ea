"""Know who answers before writing a byte: the Core's identity (docs/security.md).

The Core has no authentication and `runtime.json` outlives it, so while the Desktop is
down any local user can bind its port and receive the user's prompts. Every Core
connection is therefore checked right after `connect()` and before its first byte: the
*server end of this very connection* must belong to the user and be held by the process
`runtime.json` names.

- Linux: the server end's owner uid and inode come from one sock_diag netlink lookup by
  exact 4-tuple (constant cost whatever the number of sockets) or, where netlink is
  refused, from `/proc/net/tcp[6]`; `/proc/<pid>/fd` must then hold that socket or the
  listener on the Core's port.
- Windows: `GetExtendedTcpTable` gives the pid owning the server end; it must be the
  `runtime.json` pid and run as the user's SID.
- macOS: libproc lists the `runtime.json` pid's sockets; one must be the server end (or
  the listener whose queue holds it) and belong to the user, in a process of the user.

A connection the server has not accepted yet has no descriptor (inode 0 on Linux); it is
judged by the listener whose queue holds it, since only a holder of that listener can
ever accept it.

Only the Linux path runs here. The Windows and macOS paths were tested only through
injected tables and records, which is why their parsing and judging are pure functions.

Written with `os`, `socket`, `struct` and `sys` only (no `re`, `pathlib`, `typing` at
run time, `ctypes` only on the Windows and macOS paths): this runs on every request,
including the cold start of a host that answers one `ping`.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

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

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_V4_MAPPED_PREFIX = b"\0" * 10 + b"\xff\xff"


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
    def of(cls, sock: socket.socket) -> ConnectionEnds:
        """The ends of a connected socket (OSError when it is not connected)."""
        peer = sock.getpeername()
        here = sock.getsockname()
        family = sock.family
        return cls(
            plain_ip(socket.inet_pton(family, peer[0])),
            peer[1],
            plain_ip(socket.inet_pton(family, here[0])),
            here[1],
        )

    @property
    def where(self) -> str:
        """The Core's address as the user would write it (for messages)."""
        family = socket.AF_INET if len(self.server_ip) == 4 else socket.AF_INET6
        return f"{socket.inet_ntop(family, self.server_ip)}:{self.server_port}"


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
    return raw[12:] if len(raw) == 16 and raw[:12] == _V4_MAPPED_PREFIX else raw


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


def _refuse_os_error(exc: OSError, what: str) -> PeerRefusedError:
    if exc.errno in _RESOURCE_ERRNOS:
        return PeerRefusedError(RESOURCES, f"{what}: {exc.strerror or exc}")
    return PeerRefusedError(UNVERIFIABLE, f"{what}: {exc.strerror or exc}")


# =========================================================================================
# Linux
# =========================================================================================
# Facts from include/uapi/linux/{netlink,sock_diag,inet_diag}.h and tcp_states.h.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLMSG_ERROR = 2
_NLMSG_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQ_HEAD = struct.Struct("=BBBBI")  # inet_diag_req_v2: family, protocol, ext, pad, states
_SOCKID_PORTS = struct.Struct(">HH")  # inet_diag_sockid: sport, dport (network order)
_SOCKID_TAIL = struct.Struct("=III")  # inet_diag_sockid: if, cookie[2]
_NO_COOKIE = 0xFFFFFFFF  # INET_DIAG_NOCOOKIE: match whatever the socket's cookie
_ERRNO = struct.Struct("=i")
_UID_INODE = struct.Struct("=II")
# struct inet_diag_msg, offsets from the start of the netlink payload: family, state,
# timer, retrans (u8 each); inet_diag_sockid (sport, dport, src[16], dst[16], if,
# cookie[2]); expires, rqueue, wqueue, uid, inode (u32 each)
_MSG_FAMILY = 0
_MSG_STATE = 1
_MSG_PORTS = 4
_MSG_SRC = 8
_MSG_DST = 24
_MSG_UID = 64  # then the inode
_MSG_SIZE = 72
_DIAG_SEQ = 1  # one request per netlink socket: the answer must carry it

TCP_ESTABLISHED = 1
TCP_SYN_RECV = 3
TCP_LISTEN = 10
_QUEUED_STATES = frozenset({TCP_ESTABLISHED, TCP_SYN_RECV})
"""States of a server end that no process has accepted yet (a request socket reports
SYN_RECV with uid 0 and inode 0; a completed one ESTABLISHED with inode 0)."""


def _packed16(ip: bytes) -> bytes:
    return ip.ljust(16, b"\0")


def diag_request(family: int, local: tuple[bytes, int], remote: tuple[bytes, int]) -> bytes:
    """A sock_diag exact lookup of the TCP socket whose own address is `local` and whose
    peer is `remote` (the remote `(b"", 0)` asks for the listener on `local`)."""
    body = (
        _REQ_HEAD.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
        + _SOCKID_PORTS.pack(local[1], remote[1])
        + _packed16(local[0])
        + _packed16(remote[0])
        + _SOCKID_TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
    )
    header = _NLMSG_HEADER.pack(
        _NLMSG_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, _DIAG_SEQ, 0
    )
    return header + body


def parse_diag_reply(reply: bytes) -> TcpEnd | None:
    """The socket in a sock_diag answer; None when the kernel has no such socket.
    Any other answer raises OSError (then `/proc/net` is asked instead)."""
    if len(reply) < _NLMSG_HEADER.size:
        raise OSError(errno.EPROTO, "short sock_diag answer")
    length, kind, _flags, seq, _port = _NLMSG_HEADER.unpack_from(reply)
    if seq != _DIAG_SEQ or length > len(reply):
        raise OSError(errno.EPROTO, "sock_diag answer for another request")
    at = _NLMSG_HEADER.size
    if kind == _NLMSG_ERROR and length >= at + _ERRNO.size:
        code = -_ERRNO.unpack_from(reply, at)[0]
        if code == errno.ENOENT:
            return None
        raise OSError(code, os.strerror(code))
    if kind != _SOCK_DIAG_BY_FAMILY or length < at + _MSG_SIZE:
        raise OSError(errno.EPROTO, f"unexpected sock_diag answer type {kind}")
    family = reply[at + _MSG_FAMILY]
    width = 4 if family == socket.AF_INET else 16
    src = reply[at + _MSG_SRC : at + _MSG_SRC + width]
    dst = reply[at + _MSG_DST : at + _MSG_DST + width]
    sport, dport = _SOCKID_PORTS.unpack_from(reply, at + _MSG_PORTS)
    uid, inode = _UID_INODE.unpack_from(reply, at + _MSG_UID)
    return TcpEnd(src, sport, dst, dport, reply[at + _MSG_STATE], uid, inode)


def sock_diag_lookup(ends: ConnectionEnds, listener: bool) -> TcpEnd | None:
    """The server end (or its listener) through one netlink exact lookup; None when the
    kernel has no such socket; OSError when sock_diag is not available."""
    family = socket.AF_INET if len(ends.server_ip) == 4 else socket.AF_INET6
    remote = (b"", 0) if listener else (ends.client_ip, ends.client_port)
    request = diag_request(family, (ends.server_ip, ends.server_port), remote)
    with socket.socket(
        socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
    ) as nl:
        nl.sendto(request, (0, 0))
        # The kernel answers inside sendto(): a missing answer is an error, never a wait.
        reply = nl.recv(8192, socket.MSG_DONTWAIT)
    return parse_diag_reply(reply)


# /proc/net/tcp[6] (Documentation/networking/proc_net_tcp.rst): after "sl:", the local
# and remote address as ADDR:PORT (each 32-bit word of the address printed %08X in host
# byte order, the port %04X), the state in hex, then tx:rx, tr:when, retrnsmt, uid
# (decimal), timeout and inode (decimal).
_PROC_NET = {4: "/proc/net/tcp", 16: "/proc/net/tcp6"}
_PROC_FIELD_STATE, _PROC_FIELD_UID, _PROC_FIELD_INODE = 3, 7, 9
_READ_CHUNK = 65536


def proc_net_address(ip: bytes, port: int) -> bytes:
    """`ip:port` as `/proc/net/tcp[6]` prints it (e.g. 127.0.0.1:8080 on a little-endian
    machine is `0100007F:1F90`)."""
    words = "".join(
        f"{int.from_bytes(ip[i : i + 4], sys.byteorder):08X}" for i in range(0, len(ip), 4)
    )
    return f"{words}:{port:04X}".encode()


def _proc_net_ip(text: bytes) -> bytes:
    return b"".join(
        int(text[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(text), 8)
    )


def parse_proc_net_line(line: bytes) -> TcpEnd:
    """One socket line of `/proc/net/tcp[6]` (ValueError when it is not one)."""
    fields = line.split()
    if len(fields) <= _PROC_FIELD_INODE:
        raise ValueError("short /proc/net/tcp line")
    local_ip, _, local_port = fields[1].partition(b":")
    remote_ip, _, remote_port = fields[2].partition(b":")
    return TcpEnd(
        _proc_net_ip(local_ip),
        int(local_port, 16),
        _proc_net_ip(remote_ip),
        int(remote_port, 16),
        int(fields[_PROC_FIELD_STATE], 16),
        int(fields[_PROC_FIELD_UID]),
        int(fields[_PROC_FIELD_INODE]),
    )


def find_proc_net_line(chunks: Iterable[bytes], needle: bytes) -> bytes | None:
    """The first whole line containing `needle`, reading only as far as needed."""
    tail = b""
    for chunk in chunks:
        data = tail + chunk
        cut = data.rfind(b"\n") + 1
        lines, tail = data[:cut], data[cut:]
        at = lines.find(needle)
        if at >= 0:
            start = lines.rfind(b"\n", 0, at) + 1
            return lines[start : lines.index(b"\n", at)]
    at = tail.find(needle)
    return None if at < 0 else tail[tail.rfind(b"\n", 0, at) + 1 :]


def _read_chunks(path: str) -> Iterator[bytes]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            yield chunk
    finally:
        os.close(fd)


def _proc_net_needles(ends: ConnectionEnds, listener: bool) -> Iterator[tuple[str, bytes]]:
    """(file, text) pairs that identify the wanted line, most specific first. An IPv4
    connection to a dual-stack server is listed in tcp6 with mapped addresses."""
    candidates = [(len(ends.server_ip), ends.server_ip, ends.client_ip)]
    if len(ends.server_ip) == 4:
        mapped = _V4_MAPPED_PREFIX
        candidates.append((16, mapped + ends.server_ip, mapped + ends.client_ip))
    for width, server, client in candidates:
        path = _PROC_NET[width]
        if listener:
            anywhere = proc_net_address(bytes(width), 0)
            for local_ip in (server, bytes(width)):
                local = proc_net_address(local_ip, ends.server_port)
                yield path, b": " + local + b" " + anywhere + b" 0A "
        else:
            local = proc_net_address(server, ends.server_port)
            remote = proc_net_address(client, ends.client_port)
            yield path, b": " + local + b" " + remote + b" "


def proc_net_lookup(ends: ConnectionEnds, listener: bool) -> TcpEnd | None:
    """The server end (or its listener) from `/proc/net/tcp[6]`; None when it is not
    listed; OSError when the files cannot be read."""
    for path, needle in _proc_net_needles(ends, listener):
        line = find_proc_net_line(_read_chunks(path), needle)
        if line is not None:
            return parse_proc_net_line(line)
    return None


_LINUX_SOURCES: tuple[tuple[str, Callable[[ConnectionEnds, bool], TcpEnd | None]], ...] = (
    ("sock_diag", sock_diag_lookup),
    ("/proc/net/tcp", proc_net_lookup),
)
"""Where the owner of a socket is learnt, best first. The first that answers decides."""


def _linux_lookup(
    ends: ConnectionEnds, listener: bool, failures: list[str]
) -> tuple[TcpEnd | None, str] | None:
    """(record or None if the socket does not exist, source name); None when no source
    answered. `failures` collects why each source failed."""
    for name, lookup in _LINUX_SOURCES:
        try:
            return lookup(ends, listener), name
        except OSError as exc:
            if exc.errno in _RESOURCE_ERRNOS:
                raise _refuse_os_error(exc, name) from None
            failures.append(f"{name}: {exc.strerror or exc}")
        except ValueError as exc:
            failures.append(f"{name}: {exc}")
    return None


def _proc_status_euid(pid: int) -> int | None:
    """The effective uid on the `Uid:` line of /proc/<pid>/status (readable even where
    the descriptors are not), or None."""
    try:
        fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    at = text.find(b"\nUid:")
    fields = text[at + 5 : text.find(b"\n", at + 1)].split() if at >= 0 else []
    return int(fields[1]) if len(fields) > 1 else None


_PROBED_DESCRIPTORS = 64
"""Descriptors tried one by one before listing them all: a listener opened at start-up
is usually among the first, while listing 1,000 descriptors costs about 0.4 ms."""


def _socket_link(fd_dir: int, name: str) -> str:
    try:
        return os.readlink(name, dir_fd=fd_dir)
    except OSError:
        return ""  # unused, or closed while we looked


def pid_holds_socket(pid: int, inodes: Iterable[int], my_uid: int) -> tuple[bool | None, str]:
    """Whether process `pid` has a descriptor on one of the sockets `inodes`: True,
    False (with why), or None when this process cannot tell (with why)."""
    targets = {f"socket:[{inode}]" for inode in inodes if inode}
    try:
        fd_dir = os.open(f"/proc/{pid}/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not os.path.isdir("/proc/self/fd"):
            return None, "/proc is not mounted"
        return False, (
            f"pid {pid} is not a process this host can see (a stale runtime.json, or the "
            "Desktop runs in another pid namespace: then set checkRuntimePid to false)"
        )
    except PermissionError:
        owner = _proc_status_euid(pid)
        if owner is not None and owner != my_uid:
            return False, f"pid {pid} runs as uid {owner}, this host as uid {my_uid}"
        return None, f"pid {pid} does not let this host read its descriptors"
    except OSError as exc:
        if exc.errno in _RESOURCE_ERRNOS:
            raise _refuse_os_error(exc, f"/proc/{pid}/fd") from None
        return None, f"/proc/{pid}/fd: {exc.strerror or exc}"
    try:
        for number in range(_PROBED_DESCRIPTORS):
            if _socket_link(fd_dir, str(number)) in targets:
                return True, ""
        for name in os.listdir(fd_dir):
            if int(name) >= _PROBED_DESCRIPTORS and _socket_link(fd_dir, name) in targets:
                return True, ""
    finally:
        os.close(fd_dir)
    return False, f"pid {pid} holds neither the connection nor its listener"


def _verify_linux(ends: ConnectionEnds, expected_pid: int, check_pid: bool) -> str:
    """Owner uid of the server end and of its listener, then the pid's descriptors."""
    my_uid = os.geteuid()
    failures: list[str] = []
    found = _linux_lookup(ends, False, failures)
    if found is None:
        return _blind(ends, check_pid, "; ".join(failures))
    connection, source = found
    if connection is None:
        raise PeerRefusedError(CONNECTION_GONE, f"{ends.where}: no such connection any more")
    accepted = connection.inode != 0
    if not accepted and connection.state not in _QUEUED_STATES:
        raise PeerRefusedError(CONNECTION_GONE, f"{ends.where}: the server closed its end")
    if accepted and connection.owner != my_uid:
        raise _foreign("connection", ends, connection.owner, my_uid, source)
    # The listener feeds this port: it is judged too, and it is the only witness of a
    # connection nobody has accepted yet (a request socket reports uid 0 and inode 0).
    found = _linux_lookup(ends, True, failures)
    if found is None:
        return _blind(ends, check_pid, "; ".join(failures))
    listener, source = found
    if listener is not None and listener.state != TCP_LISTEN:
        listener = None
    if listener is None and not accepted:
        raise PeerRefusedError(CONNECTION_GONE, f"{ends.where}: nothing listens any more")
    if listener is not None and listener.owner != my_uid:
        raise _foreign("listener", ends, listener.owner, my_uid, source)
    evidence = f"{source}: the {'connection' if accepted else 'listener'} belongs to uid {my_uid}"
    if not check_pid:
        return f"{USER_ONLY}: {evidence}; pid not checked (checkRuntimePid is false)"
    inodes = (connection.inode, 0 if listener is None else listener.inode)
    holds, why = pid_holds_socket(expected_pid, inodes, my_uid)
    if holds is None:
        return f"{USER_ONLY}: {evidence}; {why}"
    if not holds:
        raise PeerRefusedError(NOT_CORE_PROCESS, f"{ends.where}: {why} ({source})")
    return f"{USER_AND_PID}: {evidence}, held by pid {expected_pid}"


def _foreign(via: str, ends: ConnectionEnds, owner: int, my_uid: int, source: str) -> Exception:
    return PeerRefusedError(
        FOREIGN_OWNER,
        f"the {via} on {ends.where} belongs to uid {owner}, this host runs as uid {my_uid} "
        f"({source})",
    )


def _blind(ends: ConnectionEnds, check_pid: bool, why: str) -> str:
    """Nothing about the server end could be learnt: refuse, unless the user opted out."""
    if check_pid:
        raise PeerRefusedError(UNVERIFIABLE, f"{ends.where}: {why}")
    return f"{NOTHING}: not verified (checkRuntimePid is false): {why}"


# =========================================================================================
# Windows (tested only through injected tables: see tests/test_peer.py)
# =========================================================================================
# GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL) fills MIB_TCPTABLE_OWNER_PID (AF_INET) or
# MIB_TCP6TABLE_OWNER_PID (AF_INET6): a DWORD row count, then rows. Addresses are in
# network byte order; a port is a DWORD whose first two bytes are the port in network
# byte order. Facts from learn.microsoft.com (tcpmib.h).
_WIN_TABLE_OWNER_PID_ALL = 5
_WIN_ERROR_INSUFFICIENT_BUFFER = 122
WIN_TCP_STATE_LISTEN = 2
_WIN_ROWS = {
    # MIB_TCPROW_OWNER_PID: dwState, dwLocalAddr, dwLocalPort, dwRemoteAddr,
    # dwRemotePort, dwOwningPid
    4: (struct.Struct("<I4s2s2x4s2s2xI"), ("state", "lip", "lport", "rip", "rport", "pid")),
    # MIB_TCP6ROW_OWNER_PID: ucLocalAddr, dwLocalScopeId, dwLocalPort, ucRemoteAddr,
    # dwRemoteScopeId, dwRemotePort, dwState, dwOwningPid
    16: (
        struct.Struct("<16s4x2s2x16s4x2s2xII"),
        ("lip", "lport", "rip", "rport", "state", "pid"),
    ),
}
_COUNT = struct.Struct("<I")


def parse_windows_tcp_table(data: bytes, width: int) -> list[TcpEnd]:
    """The rows of a MIB_TCP(6)TABLE_OWNER_PID; `width` is 4 (IPv4) or 16 (IPv6). Each
    record's owner is the row's owning pid. ValueError when the table is truncated."""
    row, names = _WIN_ROWS[width]
    if len(data) < _COUNT.size:
        raise ValueError("TCP table without a row count")
    (count,) = _COUNT.unpack_from(data)
    if _COUNT.size + count * row.size > len(data):
        raise ValueError(f"TCP table claims {count} rows but holds fewer")
    records = []
    for values in row.iter_unpack(data[_COUNT.size : _COUNT.size + count * row.size]):
        f = dict(zip(names, values, strict=True))
        records.append(
            TcpEnd(
                f["lip"],
                int.from_bytes(f["lport"], "big"),
                f["rip"],
                int.from_bytes(f["rport"], "big"),
                f["state"],
                f["pid"],
            )
        )
    return records


def judge_windows(
    tables: Sequence[tuple[int, bytes]],
    ends: ConnectionEnds,
    expected_pid: int,
    check_pid: bool,
    sid_of: Callable[[int], bytes | None],
    my_sid: bytes,
) -> str:
    """The Windows decision, from TCP tables `(width, bytes)` and a SID lookup (None:
    the process cannot be opened, so it is not the user's). Pure: tested with fakes."""
    records: list[TcpEnd] = []
    for width, data in tables:
        records.extend(parse_windows_tcp_table(data, width))
    picked = pick_server_end(records, ends, WIN_TCP_STATE_LISTEN)
    if picked is None:
        raise PeerRefusedError(CONNECTION_GONE, f"{ends.where}: no such connection any more")
    end, via = picked
    if sid_of(end.owner) != my_sid:
        raise PeerRefusedError(
            FOREIGN_OWNER,
            f"the {via} on {ends.where} is held by pid {end.owner}, not run by this user",
        )
    if not check_pid:
        return (
            f"{USER_ONLY}: GetExtendedTcpTable: the {via} is held by pid {end.owner} of this user"
        )
    if end.owner != expected_pid:
        raise PeerRefusedError(
            NOT_CORE_PROCESS,
            f"the {via} on {ends.where} is held by pid {end.owner}, runtime.json names "
            f"pid {expected_pid}",
        )
    return f"{USER_AND_PID}: GetExtendedTcpTable: the {via} is held by pid {end.owner} of this user"


def _windows_tcp_tables(ends: ConnectionEnds) -> list[tuple[int, bytes]]:  # pragma: no cover
    import ctypes

    windll = ctypes.WinDLL  # type: ignore[attr-defined,unused-ignore]
    get_table = windll("iphlpapi").GetExtendedTcpTable
    get_table.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_ulong),
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_int,
        ctypes.c_ulong,
    ]
    get_table.restype = ctypes.c_ulong
    widths = (16,) if len(ends.server_ip) == 16 else (4, 16)  # dual-stack: both tables
    tables = []
    for width in widths:
        family = socket.AF_INET if width == 4 else socket.AF_INET6
        size = ctypes.c_ulong(0)
        get_table(None, ctypes.byref(size), 0, family, _WIN_TABLE_OWNER_PID_ALL, 0)
        for _attempt in range(4):
            buffer = ctypes.create_string_buffer(size.value + 4096)
            size.value = len(buffer)
            code = get_table(buffer, ctypes.byref(size), 0, family, _WIN_TABLE_OWNER_PID_ALL, 0)
            if code == 0:
                tables.append((width, buffer.raw[: size.value]))
                break
            if code != _WIN_ERROR_INSUFFICIENT_BUFFER:
                raise OSError(errno.EIO, f"GetExtendedTcpTable failed with error {code}")
        else:
            raise OSError(errno.EIO, "GetExtendedTcpTable: the table kept growing")
    return tables


def _windows_sid(pid: int | None) -> bytes | None:  # pragma: no cover - Windows only
    """The user SID of process `pid` (None: this process) as bytes; None when the
    process cannot be opened or queried (it is not the user's)."""
    import ctypes
    from ctypes import wintypes

    windll = ctypes.WinDLL  # type: ignore[attr-defined,unused-ignore]
    kernel32 = windll("kernel32", use_last_error=True)
    advapi32 = windll("advapi32", use_last_error=True)
    kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    kernel32.OpenProcess.restype = wintypes.HANDLE
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    advapi32.OpenProcessToken.argtypes = [
        wintypes.HANDLE,
        wintypes.DWORD,
        ctypes.POINTER(wintypes.HANDLE),
    ]
    advapi32.GetTokenInformation.argtypes = [
        wintypes.HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wintypes.DWORD,
        ctypes.POINTER(wintypes.DWORD),
    ]
    advapi32.GetLengthSid.argtypes = [ctypes.c_void_p]
    advapi32.GetLengthSid.restype = wintypes.DWORD
    process_query_limited_information, token_query, token_user = 0x1000, 0x0008, 1
    if pid is None:
        process = kernel32.GetCurrentProcess()
    else:
        process = kernel32.OpenProcess(process_query_limited_information, False, pid)
        if not process:
            return None
    token = wintypes.HANDLE()
    try:
        if not advapi32.OpenProcessToken(process, token_query, ctypes.byref(token)):
            return None
        try:
            size = wintypes.DWORD(0)
            advapi32.GetTokenInformation(token, token_user, None, 0, ctypes.byref(size))
            buffer = ctypes.create_string_buffer(size.value)
            if not advapi32.GetTokenInformation(
                token, token_user, buffer, size, ctypes.byref(size)
            ):
                return None
            sid = ctypes.c_void_p.from_buffer(buffer).value  # TOKEN_USER.User.Sid
            return None if sid is None else ctypes.string_at(sid, advapi32.GetLengthSid(sid))
        finally:
            kernel32.CloseHandle(token)
    finally:
        if pid is not None:
            kernel32.CloseHandle(process)


def _verify_windows(
    ends: ConnectionEnds, expected_pid: int, check_pid: bool
) -> str:  # pragma: no cover - Windows only
    try:
        tables = _windows_tcp_tables(ends)
        my_sid = _windows_sid(None)
    except (OSError, ValueError) as exc:
        return _blind(ends, check_pid, f"GetExtendedTcpTable: {exc}")
    if my_sid is None:
        return _blind(ends, check_pid, "the host cannot read its own user SID")
    return judge_windows(tables, ends, expected_pid, check_pid, _windows_sid, my_sid)


# =========================================================================================
# macOS (tested only through injected records: see tests/test_peer.py)
# =========================================================================================
# Facts from xnu bsd/sys/proc_info.h: proc_pidinfo(PROC_PIDTBSDINFO) fills struct
# proc_bsdinfo (pbi_uid, the effective uid, at byte 20); proc_pidinfo(PROC_PIDLISTFDS)
# fills struct proc_fdinfo {int32 fd; uint32 type} pairs; proc_pidfdinfo(
# PROC_PIDFDSOCKETINFO) fills struct socket_fdinfo, laid out below.
_MAC_PROC_PIDLISTFDS = 1
_MAC_PROC_PIDTBSDINFO = 3
_MAC_PROC_PIDFDSOCKETINFO = 3
_MAC_BSDINFO_SIZE = 136
_MAC_BSDINFO_UID = 20
_MAC_FDTYPE_SOCKET = 2
_MAC_FDINFO = struct.Struct("<iI")
MAC_SOCKET_FDINFO = {
    "size": 792,  # sizeof(struct socket_fdinfo): 24 (proc_fileinfo) + 768 (socket_info)
    "uid": 40,  # psi.soi_stat.vst_uid: the socket's owner
    "kind": 256,  # psi.soi_kind: SOCKINFO_TCP = 2
    "fport": 264,  # psi.soi_proto.pri_tcp.tcpsi_ini.insi_fport (network-order u16 in an int)
    "lport": 268,  # ... insi_lport
    "vflag": 288,  # ... insi_vflag: INI_IPV4 = 1, INI_IPV6 = 2
    "faddr": 296,  # ... insi_faddr: 16 bytes, IPv4 in the last 4
    "laddr": 312,  # ... insi_laddr
    "state": 344,  # psi.soi_proto.pri_tcp.tcpsi_state: TSI_S_LISTEN = 1
}
_MAC_SOCKINFO_TCP = 2
_MAC_INI_IPV4 = 1
MAC_TSI_S_LISTEN = 1
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


def parse_mac_bsdinfo_uid(data: bytes) -> int:
    """The effective uid in a struct proc_bsdinfo."""
    if len(data) < _MAC_BSDINFO_SIZE:
        raise ValueError("short proc_bsdinfo")
    return int(_U32.unpack_from(data, _MAC_BSDINFO_UID)[0])


def parse_mac_socket_fds(data: bytes) -> list[int]:
    """The socket descriptors in a PROC_PIDLISTFDS answer."""
    usable = len(data) - len(data) % _MAC_FDINFO.size
    return [fd for fd, kind in _MAC_FDINFO.iter_unpack(data[:usable]) if kind == _MAC_FDTYPE_SOCKET]


def parse_mac_socket_fdinfo(data: bytes) -> TcpEnd | None:
    """A TCP socket from a struct socket_fdinfo (owner: the socket's uid); None for any
    other kind of socket."""
    layout = MAC_SOCKET_FDINFO
    if len(data) < layout["size"]:
        raise ValueError("short socket_fdinfo")
    if _I32.unpack_from(data, layout["kind"])[0] != _MAC_SOCKINFO_TCP:
        return None
    v4 = data[layout["vflag"]] & _MAC_INI_IPV4
    laddr = data[layout["laddr"] : layout["laddr"] + 16]
    faddr = data[layout["faddr"] : layout["faddr"] + 16]
    return TcpEnd(
        laddr[12:] if v4 else laddr,
        int.from_bytes(data[layout["lport"] : layout["lport"] + 2], "big"),
        faddr[12:] if v4 else faddr,
        int.from_bytes(data[layout["fport"] : layout["fport"] + 2], "big"),
        _I32.unpack_from(data, layout["state"])[0],
        _U32.unpack_from(data, layout["uid"])[0],
    )


def judge_macos(
    process_uid: int | None,
    sockets: Iterable[TcpEnd],
    ends: ConnectionEnds,
    expected_pid: int,
    my_uid: int,
) -> str:
    """The macOS decision, from the runtime.json process's uid (None: no such process)
    and the TCP sockets it holds. Pure: tested with fakes."""
    if process_uid is None:
        raise PeerRefusedError(NOT_CORE_PROCESS, f"pid {expected_pid} is not running")
    if process_uid != my_uid:
        raise PeerRefusedError(
            NOT_CORE_PROCESS, f"pid {expected_pid} runs as uid {process_uid}, this host as {my_uid}"
        )
    picked = pick_server_end(sockets, ends, MAC_TSI_S_LISTEN)
    if picked is None:
        raise PeerRefusedError(
            NOT_CORE_PROCESS,
            f"pid {expected_pid} holds no socket of the connection to {ends.where}",
        )
    end, via = picked
    if end.owner != my_uid:
        raise PeerRefusedError(
            FOREIGN_OWNER,
            f"the {via} on {ends.where} belongs to uid {end.owner}, this host is {my_uid}",
        )
    return f"{USER_AND_PID}: libproc: the {via} belongs to uid {my_uid}, held by pid {expected_pid}"


def _verify_macos(
    ends: ConnectionEnds, expected_pid: int, check_pid: bool
) -> str:  # pragma: no cover - macOS only
    if not check_pid:
        return _blind(ends, check_pid, "libproc finds sockets only through a pid")
    import ctypes

    try:
        libproc = ctypes.CDLL("/usr/lib/libproc.dylib", use_errno=True)
    except OSError as exc:
        return _blind(ends, check_pid, f"libproc: {exc}")
    pidinfo, fdinfo = libproc.proc_pidinfo, libproc.proc_pidfdinfo
    pidinfo.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int]
    fdinfo.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    bsd = ctypes.create_string_buffer(_MAC_BSDINFO_SIZE)
    if pidinfo(expected_pid, _MAC_PROC_PIDTBSDINFO, 0, bsd, len(bsd)) < _MAC_BSDINFO_SIZE:
        if ctypes.get_errno() == errno.ESRCH:
            return judge_macos(None, (), ends, expected_pid, os.geteuid())
        return _blind(ends, check_pid, f"proc_pidinfo({expected_pid}): errno {ctypes.get_errno()}")
    process_uid = parse_mac_bsdinfo_uid(bsd.raw)
    sockets: list[TcpEnd] = []
    if process_uid == os.geteuid():
        needed = pidinfo(expected_pid, _MAC_PROC_PIDLISTFDS, 0, None, 0)
        listing = ctypes.create_string_buffer(max(needed, 0) + 64 * _MAC_FDINFO.size)
        got = pidinfo(expected_pid, _MAC_PROC_PIDLISTFDS, 0, listing, len(listing))
        if got <= 0:
            return _blind(ends, check_pid, f"proc_pidinfo(LISTFDS): errno {ctypes.get_errno()}")
        record = ctypes.create_string_buffer(MAC_SOCKET_FDINFO["size"])
        for fd in parse_mac_socket_fds(listing.raw[:got]):
            if fdinfo(expected_pid, fd, _MAC_PROC_PIDFDSOCKETINFO, record, len(record)) == len(
                record
            ):
                end = parse_mac_socket_fdinfo(record.raw)
                if end is not None:
                    sockets.append(end)
    return judge_macos(process_uid, sockets, ends, expected_pid, os.geteuid())


def _verify_unsupported(ends: ConnectionEnds, expected_pid: int, check_pid: bool) -> str:
    return _blind(ends, check_pid, f"no way to identify a socket's owner on {sys.platform}")


_VERIFIERS: dict[str, Callable[[ConnectionEnds, int, bool], str]] = {
    "linux": _verify_linux,
    "win32": _verify_windows,
    "darwin": _verify_macos,
}


def verify_core_peer(sock: socket.socket, expected_pid: int, check_pid: bool = True) -> str:
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
    verifier = _VERIFIERS.get(sys.platform, _verify_unsupported)
    try:
        return verifier(ends, expected_pid, check_pid)
    except OSError as exc:
        raise _refuse_os_error(exc, ends.where) from None
    except ValueError as exc:  # a table or record the parsers do not understand
        raise PeerRefusedError(UNVERIFIABLE, f"{ends.where}: {exc}") from None
