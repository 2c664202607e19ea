"""The Linux peer check: who owns the server end of a Core connection, and whether the
`runtime.json` pid holds it (docs/security.md).

The server end's owner uid and inode come from one sock_diag netlink lookup by exact
4-tuple (constant cost whatever the number of sockets) or, where netlink is refused,
from `/proc/net/tcp[6]`; `/proc/<pid>/fd` must then hold that socket or the listener on
the Core's port. A connection the server has not accepted yet has no descriptor (inode
0); it is judged by the listener whose queue holds it.

Written with `os`, `_socket`, `struct` and `sys` only (no `re`, `pathlib`, `typing` at
run time, nor the `socket` wrapper, whose enums cost a cold start more than the check):
this runs on every request, including the cold start of a host that answers one `ping`.
"""

from __future__ import annotations

import _socket
import errno
import os
import struct
import sys

from native_host.core.peer.rule import (
    CONNECTION_GONE,
    FOREIGN_OWNER,
    NOT_CORE_PROCESS,
    RESOURCE_ERRNOS,
    USER_AND_PID,
    USER_ONLY,
    V4_MAPPED_PREFIX,
    ConnectionEnds,
    PeerRefusedError,
    TcpEnd,
    blind,
    refuse_os_error,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

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
        _REQ_HEAD.pack(family, _socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
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
    width = 4 if family == _socket.AF_INET else 16
    src = reply[at + _MSG_SRC : at + _MSG_SRC + width]
    dst = reply[at + _MSG_DST : at + _MSG_DST + width]
    sport, dport = _SOCKID_PORTS.unpack_from(reply, at + _MSG_PORTS)
    uid, inode = _UID_INODE.unpack_from(reply, at + _MSG_UID)
    return TcpEnd(src, sport, dst, dport, reply[at + _MSG_STATE], uid, inode)


def sock_diag_lookup(ends: ConnectionEnds, listener: bool) -> TcpEnd | None:
    """The server end (or its listener) through one netlink exact lookup; None when the
    kernel has no such socket; OSError when sock_diag is not available."""
    family = _socket.AF_INET if len(ends.server_ip) == 4 else _socket.AF_INET6
    remote = (b"", 0) if listener else (ends.client_ip, ends.client_port)
    request = diag_request(family, (ends.server_ip, ends.server_port), remote)
    nl = _socket.socket(
        _socket.AF_NETLINK, _socket.SOCK_DGRAM | _socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
    )
    try:
        nl.sendto(request, (0, 0))
        # The kernel answers inside sendto(): a missing answer is an error, never a wait.
        reply = nl.recv(8192, _socket.MSG_DONTWAIT)
    finally:
        nl.close()
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
        mapped = V4_MAPPED_PREFIX
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
            if exc.errno in RESOURCE_ERRNOS:
                raise refuse_os_error(exc, name) from None
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
        if exc.errno in RESOURCE_ERRNOS:
            raise refuse_os_error(exc, f"/proc/{pid}/fd") from None
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


def verify(ends: ConnectionEnds, expected_pid: int, check_pid: bool) -> str:
    """Owner uid of the server end and of its listener, then the pid's descriptors."""
    my_uid = os.geteuid()
    failures: list[str] = []
    found = _linux_lookup(ends, False, failures)
    if found is None:
        return blind(ends, check_pid, "; ".join(failures))
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
        return blind(ends, check_pid, "; ".join(failures))
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
