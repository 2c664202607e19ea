"""On the Windows lane: the interpreter and its install under `C:\\users\\O'Brien José\\...`
(an apostrophe, a letter outside ASCII). cmd.exe reads the batch launcher in the OEM code
page and ends `-c "..."` at the first `"`, so `install` writes an ASCII batch file that
names the interpreter relative to its own folder (`%~dp0`) or by its 8.3 short name;
either way the host Chrome starts through cmd.exe answers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import HOST_NAME
from native_host.errors import STAGE_READ_LAUNCH_CONFIG
from tests.support.wine import LANE, run_python, windows_path
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

ODD_USER = "O'Brien Jos\u00e9"


@pytest.fixture(scope="module")
def odd_profile(lane: None) -> Iterator[Path]:
    """C:\\users\\O'Brien José with a copy of the lane's interpreter (and this package) in
    py\\, removed afterwards."""
    profile = LANE.drive_c / "users" / ODD_USER
    shutil.rmtree(profile, ignore_errors=True)
    shutil.copytree(LANE.interpreter, profile / "py", symlinks=True)
    try:
        yield profile
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.parametrize(
    "launcher_folder",
    [
        pytest.param("profile", id="relative-to-the-batch-file"),
        pytest.param("elsewhere", id="short-name"),
    ],
)
def test_host_under_an_odd_profile_started_through_cmd_answers(
    wine_world: WineWorld, odd_profile: Path, launcher_folder: str
) -> None:
    python = odd_profile / "py" / "python.exe"
    state = (
        odd_profile / "AppData" / "Local" / "pedelec-native-host"
        if launcher_folder == "profile"
        else wine_world.root / "launcher"
    )
    state.mkdir(parents=True, exist_ok=True)
    env = {**wine_world.env, "PEDELEC_NATIVE_HOST_STATE_DIR": windows_path(state)}
    installed = run_python(
        ["-m", "native_host", "install", "--browser", "chrome"], env=env, python=python
    )
    assert installed.returncode == 0, installed.stderr.decode(errors="replace")
    try:
        host = wine_world.start_as_chrome(registry_name=HOST_NAME, env=env)
        response = host.request({"type": "ping", "requestId": "odd"}, timeout=60)
        # No Core and no app-launch.json here: the staged answer proves the host ran.
        assert response["error"]["details"]["stage"] == STAGE_READ_LAUNCH_CONFIG, response
        (state / "pedelec-native-host.bat").read_bytes().decode("ascii")  # whatever the paths
    finally:
        run_python(["-m", "native_host", "uninstall"], env=env, python=python)
