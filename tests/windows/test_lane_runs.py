"""On the Windows lane: the lane's own way of running a Windows program takes its output
when it exits, even when another process still holds its pipes, as the services the first
Wine program of a wineserver starts do (a lane step once hung 120 s in `products()` on
them). A child started with inherited handles stands in for such a service."""

from __future__ import annotations

import time

import pytest

from tests.support.wine import run_code

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

HOLDER_S = 60


def test_output_is_taken_at_exit_while_a_child_holds_the_pipes(lane: None) -> None:
    code = (
        "import subprocess, sys; "
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({HOLDER_S})'], "
        "close_fds=False); print('parent done')"
    )
    started = time.monotonic()
    assert run_code(code, timeout=HOLDER_S * 2).strip() == "parent done"
    # Ordering, not speed: it came back before the child that holds the pipes let go.
    assert time.monotonic() - started < HOLDER_S
