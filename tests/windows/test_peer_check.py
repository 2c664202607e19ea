"""On the Windows lane: the peer check's real Windows API calls (GetExtendedTcpTable,
OpenProcess, OpenProcessToken, GetTokenInformation) on a Core listening in the same
Windows process (native_host/core/peer/windows.py, docs/security.md).

Wine 8 names the owning pid only of sockets whose descriptor the asking process holds,
which for a loopback pair in one process is the connecting end; the listener and the
server end are pid 0 even there. So the lane shows, for real: a server end of pid 0 is
refused as unverifiable (never as another user's) and passes as `none` with
`checkRuntimePid: false`; a server end that closed is gone; and the full user+pid path
(the row's pid, its process's token SID against the host's) on the socket Wine does
attribute, judged as the server end of the reversed connection.
"""

from __future__ import annotations

import json

import pytest

from native_host.core import peer
from tests.support.wine import run_code

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

CHECKS = r"""
import json, os, socket, time
from native_host.core import peer
from native_host.core.peer import rule, windows
from native_host import windows_acl

def verdict(sock, pid, check_pid):
    try:
        return {"ok": peer.verify_core_peer(sock, pid, check_pid)}
    except peer.PeerRefusedError as exc:
        return {"reason": exc.reason, "detail": exc.detail}

def judged(ends, pid, check_pid=True):
    try:
        return {"ok": windows.verify(ends, pid, check_pid)}
    except peer.PeerRefusedError as exc:
        return {"reason": exc.reason, "detail": exc.detail}

out = {"pid": os.getpid()}
listener = socket.create_server(("127.0.0.1", 0))
sock = socket.create_connection(listener.getsockname())
out["queued"] = verdict(sock, os.getpid(), True)
conn, _ = listener.accept()
out["accepted"] = verdict(sock, os.getpid(), True)
out["accepted_opted_out"] = verdict(sock, os.getpid(), False)
# The socket Wine attributes: the host's own end, judged as the server end of the
# connection seen the other way round.
ends = rule.ConnectionEnds.of(sock)
reverse = rule.ConnectionEnds(ends.client_ip, ends.client_port, ends.server_ip, ends.server_port)
out["attributed"] = judged(reverse, os.getpid())
out["attributed_other_pid"] = judged(reverse, os.getpid() + 4)
out["attributed_opted_out"] = judged(reverse, os.getpid() + 4, False)
out["own_sid"] = (windows_acl.process_sid(None) or b"").hex()
out["sid_by_pid"] = (windows_acl.process_sid(os.getpid()) or b"").hex()
out["sid_of_nobody"] = windows_acl.process_sid(0)
conn.close()
time.sleep(0.5)
out["closed"] = verdict(sock, os.getpid(), True)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def checks(lane: None) -> dict[str, object]:
    result: dict[str, object] = json.loads(run_code(CHECKS, timeout=300))
    return result


def test_a_server_end_of_pid_0_is_unverifiable_never_another_users(
    checks: dict[str, dict[str, str]],
) -> None:
    for case in ("queued", "accepted"):
        assert checks[case]["reason"] == peer.UNVERIFIABLE, checks[case]
        assert "(pid 0)" in checks[case]["detail"], checks[case]
        assert "for the connection" in checks[case]["detail"], checks[case]
    opted_out = checks["accepted_opted_out"]["ok"]
    assert opted_out.startswith(f"{peer.NOTHING}: not verified (checkRuntimePid is false)")


def test_an_attributed_socket_passes_by_user_and_pid(checks: dict[str, dict[str, str]]) -> None:
    pid = checks["pid"]
    assert checks["attributed"]["ok"] == (
        f"{peer.USER_AND_PID}: GetExtendedTcpTable: the connection is held by pid {pid} "
        "of this user"
    )
    assert checks["attributed_other_pid"]["reason"] == peer.NOT_CORE_PROCESS
    assert checks["attributed_opted_out"]["ok"].startswith(f"{peer.USER_ONLY}: ")


def test_token_sids_are_read(checks: dict[str, object]) -> None:
    own = checks["own_sid"]
    assert isinstance(own, str) and own.startswith("0105") and own == checks["sid_by_pid"]
    assert checks["sid_of_nobody"] is None


def test_a_server_end_that_closed_is_gone(checks: dict[str, dict[str, str]]) -> None:
    assert checks["closed"]["reason"] == peer.CONNECTION_GONE, checks["closed"]
    assert "the server closed its end" in checks["closed"]["detail"]
