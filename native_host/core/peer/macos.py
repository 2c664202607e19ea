"""The macOS peer check: libproc lists the `runtime.json` pid's sockets; one must be the
server end of the Core connection (or the listener whose queue holds it) and belong to
the user, in a process of the user (docs/security.md). Tested only through records built
field by field from xnu's declarations (tests/test_peer.py): no macOS runs here.
"""

from __future__ import annotations

import errno
import os
import struct

from native_host.core.peer.rule import (
    FOREIGN_OWNER,
    NOT_CORE_PROCESS,
    USER_AND_PID,
    ConnectionEnds,
    PeerRefusedError,
    TcpEnd,
    blind,
    pick_server_end,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

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


def verify(
    ends: ConnectionEnds, expected_pid: int, check_pid: bool
) -> str:  # pragma: no cover - macOS only
    if not check_pid:
        return blind(ends, check_pid, "libproc finds sockets only through a pid")
    import ctypes

    try:
        libproc = ctypes.CDLL("/usr/lib/libproc.dylib", use_errno=True)
    except OSError as exc:
        return blind(ends, check_pid, f"libproc: {exc}")
    pidinfo, fdinfo = libproc.proc_pidinfo, libproc.proc_pidfdinfo
    pidinfo.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int]
    fdinfo.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    bsd = ctypes.create_string_buffer(_MAC_BSDINFO_SIZE)
    if pidinfo(expected_pid, _MAC_PROC_PIDTBSDINFO, 0, bsd, len(bsd)) < _MAC_BSDINFO_SIZE:
        if ctypes.get_errno() == errno.ESRCH:
            return judge_macos(None, (), ends, expected_pid, os.geteuid())
        return blind(ends, check_pid, f"proc_pidinfo({expected_pid}): errno {ctypes.get_errno()}")
    process_uid = parse_mac_bsdinfo_uid(bsd.raw)
    sockets: list[TcpEnd] = []
    if process_uid == os.geteuid():
        needed = pidinfo(expected_pid, _MAC_PROC_PIDLISTFDS, 0, None, 0)
        listing = ctypes.create_string_buffer(max(needed, 0) + 64 * _MAC_FDINFO.size)
        got = pidinfo(expected_pid, _MAC_PROC_PIDLISTFDS, 0, listing, len(listing))
        if got <= 0:
            return blind(ends, check_pid, f"proc_pidinfo(LISTFDS): errno {ctypes.get_errno()}")
        record = ctypes.create_string_buffer(MAC_SOCKET_FDINFO["size"])
        for fd in parse_mac_socket_fds(listing.raw[:got]):
            if fdinfo(expected_pid, fd, _MAC_PROC_PIDFDSOCKETINFO, record, len(record)) == len(
                record
            ):
                end = parse_mac_socket_fdinfo(record.raw)
                if end is not None:
                    sockets.append(end)
    return judge_macos(process_uid, sockets, ends, expected_pid, os.geteuid())
