"""On the Windows lane: with the Desktop closed, a request makes the host (the lane's
python.exe, and the installed MSI's executable started through HKCU and cmd.exe) start it in
the background from `app-launch.json` (spec 7.14): a stand-in for the Desktop's .exe under
`C:\\Program Files\\...` (tests/windows/desktop_standin.c) starts the dev Core, and the
request is answered `ok: true`. The launch chain is walked from the drive's root, and the
stand-in is started with exactly `--background`.

The dev Core is another Wine process, whose socket Wine reports as owned by pid 0, which
the peer check rightly calls unverifiable: the world sets `checkRuntimePid: false`, the
documented setting for a Core whose process the host cannot see (docs/security.md)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.wine import LANE, windows_path
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]


@pytest.fixture
def program_files(lane: None, tmp_path: Path) -> Iterator[Path]:
    """A folder of its own under C:\\Program Files, removed afterwards."""
    folder = LANE.drive_c / "Program Files" / f"Pedelec {tmp_path.name}"
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("spelling", ["drive", "extended"])
def test_desktop_under_program_files_is_launched_and_the_request_answered(
    wine_world: WineWorld, program_files: Path, spelling: str, windows_host: dict[str, str]
) -> None:
    """`extended`: the same path as `\\\\?\\C:\\...`, a form the walk must root too."""
    desktop = program_files / "Pedelec.exe"
    shutil.copy(LANE.desktop_standin, desktop)
    home = wine_world.env["PEDELEC_HOME"]
    core = f'"{windows_path(LANE.python)}" -m native_host dev-core --home "{home}"'
    (program_files / "Pedelec.cmdline").write_text(core, encoding="utf-8")
    executable = windows_path(desktop)
    assert executable.startswith("C:\\Program Files\\Pedelec ")
    if spelling == "extended":
        executable = "\\\\?\\" + executable
    launch = {"version": 1, "executablePath": executable, "backgroundArgs": ["--background"]}
    (wine_world.home / "app-launch.json").write_text(json.dumps(launch))
    wine_world.write_config(
        {"checkRuntimePid": False, "launchTimeoutMs": 90_000, "logLevel": "debug"}
    )

    host = wine_world.start_as_chrome(**windows_host)
    response = host.request({"type": "ping", "requestId": "launch"}, timeout=120)
    log = "".join(p.read_text() for p in (wine_world.root / "logs").glob("*.log*"))
    assert response["ok"] is True, (response, host.stderr, log)
    started = (program_files / "Pedelec.started").read_text(encoding="utf-8")
    assert started.split()[-1] == "--background", started
