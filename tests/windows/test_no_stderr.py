"""On the Windows lane: a host started with no valid stderr handle, as Chrome's
NativeHostsExecutablesLaunchDirectly policy starts an .exe host (directly, without
cmd.exe, stderr not redirected), still frames on stdout: setting up stdio falls back to
the null device where `dup2(2, 1)` has no stderr to copy."""

from __future__ import annotations

import pytest

from native_host.errors import STAGE_READ_LAUNCH_CONFIG
from native_host.hostproc import OFFICIAL_ORIGIN
from tests.support.wine import LANE, windows_path
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]


def test_host_without_stderr_answers_and_exits_on_eof(wine_world: WineWorld) -> None:
    host = wine_world.start_as_chrome(
        command=f'"{windows_path(LANE.python)}" -m native_host {OFFICIAL_ORIGIN}',
        no_stderr=True,
    )
    response = host.request({"type": "ping", "requestId": "no-stderr"}, timeout=60)
    assert response["error"]["details"]["stage"] == STAGE_READ_LAUNCH_CONFIG, response
    host.close_stdin()
    assert host.proc.wait(60) == 0
