"""On the Windows lane: with HOME set elsewhere (Git Bash, MSYS2, Cygwin, a corporate H:),
the host (the lane's python.exe, and the installed MSI's executable) and `doctor` look for
the Desktop's files under %USERPROFILE%\\.pedelec, where the Desktop writes them, and
`doctor` runs to the end without a traceback."""

from __future__ import annotations

import ntpath

import pytest

from native_host.errors import STAGE_READ_LAUNCH_CONFIG
from tests.support.wine import run_python
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

ELSEWHERE = "H:\\"
"""Where a corporate profile points HOME (Wine passes no Unix HOME: it is set Windows-side)."""


def test_host_with_home_elsewhere_reads_the_userprofile_pedelec_home(
    wine_world: WineWorld, windows_profile: str, windows_host: dict[str, str]
) -> None:
    host = wine_world.start_as_chrome(
        **windows_host, env={"PEDELEC_HOME": ""}, windows_env={"HOME": ELSEWHERE}
    )
    response = host.request({"type": "ping", "requestId": "home"}, timeout=60)
    details = response["error"]["details"]
    assert details["stage"] == STAGE_READ_LAUNCH_CONFIG, response
    expected = ntpath.join(windows_profile, ".pedelec", "app-launch.json")
    assert details["launchConfigPath"].lower() == expected.lower(), response


def test_doctor_with_home_elsewhere_runs_and_reads_the_userprofile(
    wine_world: WineWorld, windows_profile: str
) -> None:
    code = (
        "import os, sys\n"
        f"os.environ['HOME'] = {ELSEWHERE!r}\n"
        "os.environ.pop('PEDELEC_HOME', None)\n"
        "from native_host.cli import main\n"
        "sys.exit(main(['doctor']))\n"
    )
    done = run_python(["-c", code], env=wine_world.env)
    report, errors = done.stdout.decode(), done.stderr.decode(errors="replace")
    assert "Traceback" not in report + errors, errors
    assert done.returncode in (0, 1), errors  # 1: some check failed (nothing installed)
    runtime = ntpath.join(windows_profile, ".pedelec", "runtime.json")
    assert runtime.lower() in report.lower(), report
    assert ELSEWHERE not in report, report
