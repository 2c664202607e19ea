"""`HostProcess` (the one way the suite, the demo and `doctor` run a host) closes every
pipe itself: a host that stopped reading before a write leaves no buffered bytes for the
garbage collector to flush, which Python 3.13 reports as "Exception ignored ...
BrokenPipeError" on doctor's stderr."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from typing import Any

import pytest

from native_host.hostproc import HostExitedError, HostProcess

pytestmark = pytest.mark.process


def open_files(pid: int) -> set[str]:
    """What the process's descriptors point at (`pipe:[inode]` for a pipe)."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):  # closed while listed
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return found


def test_a_write_to_a_host_that_closed_stdin_leaves_nothing_to_flush_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    child = "import os, time; os.close(0); time.sleep(30)"
    host = HostProcess([sys.executable, "-c", child], args=())
    assert host.proc.stdin is not None
    pipe = f"pipe:[{os.fstat(host.proc.stdin.fileno()).st_ino}]"
    deadline = time.monotonic() + 30
    while pipe in open_files(host.proc.pid):  # until the child holds no end of stdin
        assert time.monotonic() < deadline, "the child never closed its stdin"
        time.sleep(0.01)
    with pytest.raises(HostExitedError):
        host.send({"type": "ping", "requestId": "p"})
    assert host.proc.stdin.closed  # at once, not when the object goes
    host.proc.kill()
    host.proc.wait()
    del host
    gc.collect()
    assert unraisable == []


def test_close_after_a_kill_closes_every_pipe() -> None:
    host = HostProcess([sys.executable, "-c", "import time; time.sleep(30)"], args=())
    host.proc.kill()
    host.proc.wait()
    host.close()
    pipes = (host.proc.stdin, host.proc.stdout, host.proc.stderr)
    assert all(pipe is not None and pipe.closed for pipe in pipes)


def test_stop_closes_every_pipe() -> None:
    host = HostProcess([sys.executable, "-c", "import sys; sys.stdin.read()"], args=())
    host.stop()
    assert host.proc.returncode == 0
    assert all(p is not None and p.closed for p in (host.proc.stdin, host.proc.stdout))
    assert host.proc.stderr is not None and host.proc.stderr.closed
