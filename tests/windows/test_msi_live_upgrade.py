"""On the Windows lane: the MSI upgraded while three of its hosts serve (issue 30).

The older package is installed and registered; three hosts started as Chrome on Windows
starts them (HKCU, the manifest, `cmd.exe /d /s /c`) are mid-stream, have a request in
flight and are idle (tests/support/live_hosts.py); the newer package, whose internals
differ (tests/support/variant.py), is installed by Wine's msiexec with no UI. It
succeeds with 0, not 3010 (no file was in use: nothing scheduled for a reboot, nothing
to close), every host answers every request type through it and through a Core restart
that starts the Desktop (a stand-in under C:\\Program Files running the dev Core under
Wine), the next host runs the newer version from its sealed image, `doctor` names both,
and once the old hosts have exited nothing of the older version is left.

What only a real Windows shows: Windows Installer's in-use checks (FilesInUse and the
Restart Manager, which Wine does not run), an in-use executable's protection from
deletion as Windows enforces it, and Defender's scan of the new executable.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host import HOST_NAME, __version__, startimage
from tests.support.live_hosts import ThreeLiveHosts
from tests.support.msi import (
    EXECUTABLE,
    built_msi,
    install,
    install_dir,
    products,
    uninstall,
    version_dir,
)
from tests.support.msi import newer_msi as msi_newer
from tests.support.variant import newer_version
from tests.support.wine import (
    LANE,
    linux_path,
    start_as_chrome,
    stop_wine,
    windows_path,
    wine_environment,
)
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
    pytest.mark.timeout(900),  # two installs and some 200 requests under Wine
]


class LaneDesktop:
    """Pedelec Desktop under `C:\\Program Files`: tests/windows/desktop_standin.c, which
    starts the dev Core (current generation) of the lane's Windows Python."""

    def __init__(self, folder: Path, home: Path) -> None:
        self.folder = folder
        self.home = home
        folder.mkdir(parents=True)
        shutil.copy(LANE.desktop_standin, folder / "Pedelec.exe")
        core = (
            f'"{windows_path(LANE.python)}" -m native_host dev-core --home '
            f'"{windows_path(home)}" --generation current'
        )
        (folder / "Pedelec.cmdline").write_text(core, encoding="utf-8")

    def register(self) -> None:
        executable = windows_path(self.folder / "Pedelec.exe")
        launch = {"version": 1, "executablePath": executable, "backgroundArgs": ["--background"]}
        (self.home / "app-launch.json").write_text(json.dumps(launch))

    def launches(self) -> list[Any]:
        started = self.folder / "Pedelec.started"
        return [started.read_text(encoding="utf-8")] if started.exists() else []

    def kill(self) -> None:
        """The Core it started (its pid is in runtime.json), through Wine's taskkill."""
        try:
            pid = json.loads((self.home / "runtime.json").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return
        subprocess.run(
            ["wine", "taskkill", "/f", "/pid", str(pid)],
            capture_output=True, env=wine_environment(), timeout=60, check=False,
        )  # fmt: skip


@pytest.fixture
def clean_prefix(lane: None) -> Iterator[None]:
    """No Pedelec MSI in the prefix before the test, and none after it."""
    assert products() == [], "the lane's prefix already holds a Pedelec MSI"
    try:
        yield
    finally:
        stop_wine()
        for product in products():
            subprocess.run(
                ["wine", "msiexec", "/x", product["product"], "/qn"],
                capture_output=True, stdin=subprocess.DEVNULL, env=wine_environment(),
                timeout=300, check=False,
            )  # fmt: skip


@pytest.fixture
def program_files(lane: None, tmp_path: Path) -> Iterator[Path]:
    folder = LANE.drive_c / "Program Files" / f"Pedelec {tmp_path.name}"
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def installed_files(folder: str) -> set[str]:
    root = linux_path(folder)
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def package_files(msi: Path) -> set[str]:
    root = msi.parent / "pedelec-native-host-msi"
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_an_upgrade_under_live_hosts_asks_nothing_and_keeps_every_host_answering(
    clean_prefix: None,
    wine_world: WineWorld,
    program_files: Path,
    windows_profile: str,
    tmp_path: Path,
) -> None:
    newer_msi = msi_newer()
    older = built_msi()
    folder = install_dir(windows_profile)
    old, new = __version__, newer_version()
    wine_world.write_config({"checkRuntimePid": False, "launchTimeoutMs": 180_000})
    live = ThreeLiveHosts(
        tmp_path / "live",
        lambda: [],
        wine_world.env,
        spawn=lambda: start_as_chrome(wine_world.env, registry_name=HOST_NAME),
        home=wine_world.home,
        log_dir=wine_world.root / "logs",
        desktop=LaneDesktop(program_files, wine_world.home),
        relaunched_names=windows_path,
    )
    try:
        assert install(older).returncode == 0
        live.start()
        assert live.versions() == {old}
        upgraded = install(newer_msi)
        # 0, not 3010 (ERROR_SUCCESS_REBOOT_REQUIRED): no file was in use.
        assert upgraded.returncode == 0, upgraded
        assert [p["version"] for p in products()] == [new]
        live.after_upgrade()
        live.core_restart()
        assert live.versions() == {old}
        assert live.next_start() == (new, startimage.LOADED)
        # The older version's folder stays while its hosts run; doctor says so.
        assert linux_path(version_dir(folder, old)).is_dir()
        doctor = subprocess.run(
            ["wine", str(linux_path(f"{version_dir(folder, new)}\\{EXECUTABLE}")), "doctor",
             "--json", "--browser", "chrome"],
            capture_output=True, env=wine_environment(wine_world.env), timeout=300, check=False,
        )  # fmt: skip
        found = {(f["check"], f["status"]) for f in json.loads(doctor.stdout)["findings"]}
        assert {("host version", "ok"), ("older hosts running", "warn")} <= found, doctor.stdout
    finally:
        live.close()
        stop_wine()
    # The last old host could not remove its own running executable; the next host's
    # exit removes what is left of the older version.
    host = start_as_chrome(wine_world.env, registry_name=HOST_NAME)
    try:
        host.close_stdin()
        assert host.wait(120) == 0
    finally:
        host.stop()
        stop_wine()
    assert installed_files(folder) == package_files(newer_msi)
    assert uninstall(newer_msi).returncode == 0
    assert products() == []
    assert not linux_path(folder).exists()
