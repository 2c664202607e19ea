"""The Windows peer check: `GetExtendedTcpTable` gives the pid owning the server end of a
Core connection; it must be the `runtime.json` pid and run as the user's SID
(docs/security.md). The parsing and the decision are pure functions, tested with tables
built field by field; the API calls run on the Windows lane.
"""

from __future__ import annotations

import _socket
import errno
import struct

from native_host.core.peer.rule import (
    CONNECTION_GONE,
    FOREIGN_OWNER,
    NOT_CORE_PROCESS,
    USER_AND_PID,
    USER_ONLY,
    ConnectionEnds,
    PeerRefusedError,
    TcpEnd,
    blind,
    is_server_end,
    pick_server_end,
)
from native_host.windows_acl import built_in_calls, process_sid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL) fills MIB_TCPTABLE_OWNER_PID (AF_INET) or
# MIB_TCP6TABLE_OWNER_PID (AF_INET6): a DWORD row count, then rows. Addresses are in
# network byte order; a port is a DWORD whose first two bytes are the port in network
# byte order. Facts from learn.microsoft.com (tcpmib.h).
_WIN_TABLE_OWNER_PID_ALL = 5
_WIN_FIRST_BUFFER_BYTES = 65_536
"""The buffer of the first call: room for 2,700 IPv4 rows (1,100 IPv6), so one call is
usually enough. Each call walks every TCP socket of the machine (under Wine 8 also every
process's descriptors: about 12 ms with a quiet machine, 40 ms on a busy one), and asking
for the size first would double the calls."""
_WIN_RETRIED_ERRORS = frozenset({122, 14})
"""ERROR_INSUFFICIENT_BUFFER (the table grew between two calls) and ERROR_OUTOFMEMORY,
which Wine 8 returns for about 1 call in 150 (seen 2 in 300 on the Windows lane)."""
WIN_TCP_STATE_LISTEN = 2
_WIN_SERVER_CLOSED_STATES = frozenset({1, 6, 7, 9, 11, 12})
"""MIB_TCP_STATE_CLOSED, FIN_WAIT1, FIN_WAIT2, CLOSING, TIME_WAIT, DELETE_TCB: the server
has closed its end of the connection (the host has not closed its own)."""
WIN_NO_OWNER = 0
"""The owning pid of a row no process is known to hold: pid 0 is the System Idle Process,
which holds no user's socket (Windows lists TIME_WAIT rows under it), and Wine gives it
every socket whose descriptor the asking process does not hold. Not known is not
another user's: it is a check that could not be made."""
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
    the process cannot be opened, so it is not the user's). An owner of pid 0 is not
    known: refused as unverifiable unless `check_pid` is False. Pure: tested with
    recorded tables."""
    records: list[TcpEnd] = []
    for width, data in tables:
        records.extend(parse_windows_tcp_table(data, width))
    picked = pick_server_end(records, ends, WIN_TCP_STATE_LISTEN)
    if picked is None:
        raise PeerRefusedError(CONNECTION_GONE, f"{ends.where}: no such connection any more")
    end, via = picked
    if via == "connection" and end.state in _WIN_SERVER_CLOSED_STATES:
        raise PeerRefusedError(CONNECTION_GONE, f"{ends.where}: the server closed its end")
    if end.owner == WIN_NO_OWNER:
        return blind(
            ends, check_pid, f"GetExtendedTcpTable names no owning process for the {via} (pid 0)"
        )
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


def tables_to_judge(ends: ConnectionEnds, fetch: Callable[[int], bytes]) -> list[tuple[int, bytes]]:
    """The TCP tables the decision needs, fetched (`fetch(width)`) one at a time: for an
    IPv4 connection the IPv4 table, and the IPv6 one only when the IPv4 table does not
    hold the connection's server end (a dual-stack Core lists it there, as a mapped
    address). Pure but for `fetch`: tested with recorded tables."""
    if len(ends.server_ip) == 16:
        return [(16, fetch(16))]
    tables = [(4, fetch(4))]
    if not any(is_server_end(end, ends) for end in parse_windows_tcp_table(tables[0][1], 4)):
        tables.append((16, fetch(16)))
    return tables


def _fetch_tcp_table(width: int) -> bytes:  # pragma: no cover - Windows only
    """GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL) of one family: one call when the
    first buffer is big enough, another of the size it asks for when not (the Windows
    bundle's built-in call, else ctypes: windows_acl.built_in_calls)."""
    family = _socket.AF_INET if width == 4 else _socket.AF_INET6
    calls = built_in_calls()
    if calls is not None:
        table: bytes = calls.tcp_table(family, _WIN_FIRST_BUFFER_BYTES)
        return table
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
    size = ctypes.c_ulong(_WIN_FIRST_BUFFER_BYTES)
    for _attempt in range(4):
        buffer = ctypes.create_string_buffer(size.value)
        code = get_table(buffer, ctypes.byref(size), 0, family, _WIN_TABLE_OWNER_PID_ALL, 0)
        if code == 0:
            return buffer.raw[: size.value]
        if code not in _WIN_RETRIED_ERRORS:
            raise OSError(errno.EIO, f"GetExtendedTcpTable failed with error {code}")
        size.value = max(size.value, len(buffer)) + 4096  # the size it asked for, and room
    raise OSError(errno.EIO, f"GetExtendedTcpTable kept failing (error {code})")


def verify(
    ends: ConnectionEnds, expected_pid: int, check_pid: bool
) -> str:  # pragma: no cover - Windows only
    try:
        tables = tables_to_judge(ends, _fetch_tcp_table)
        my_sid = process_sid(None)
    except (OSError, ValueError) as exc:
        return blind(ends, check_pid, f"GetExtendedTcpTable: {exc}")
    if my_sid is None:
        return blind(ends, check_pid, "the host cannot read its own user SID")
    return judge_windows(tables, ends, expected_pid, check_pid, process_sid, my_sid)
