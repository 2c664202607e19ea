"""The Windows lane's fixtures (tests/support/wine.py holds the helpers behind them)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from native_host import HOST_NAME
from native_host.hostproc import OFFICIAL_ORIGIN
from tests.support.msi import (
    EXECUTABLE,
    MANIFEST,
    built_msi,
    install,
    install_dir,
    products,
    uninstall,
    version_dir,
)
from tests.support.wine import LANE, require_lane, run_code, stop_wine, windows_path
from tests.support.wine_world import WineWorld


@pytest.fixture(scope="session")
def lane() -> Iterator[None]:
    """Skip outside the lane's step, fail inside it when a piece is missing; after the
    lane's tests, end whatever Wine processes are left."""
    require_lane()
    try:
        yield
    finally:
        stop_wine()


@pytest.fixture
def wine_world(lane: None, tmp_path: Path) -> Iterator[WineWorld]:
    world = WineWorld(tmp_path)
    try:
        yield world
    finally:
        world.close()


@pytest.fixture(scope="session")
def windows_profile(lane: None) -> str:
    """%USERPROFILE% of the prefix's Windows user (C:\\users\\<unix user>)."""
    return run_code("import os; print(os.environ['USERPROFILE'])").strip()


@dataclass(frozen=True)
class InstalledMsi:
    """The MSI, installed for the prefix's user by Wine's msiexec."""

    msi: Path
    folder: str
    """Its install folder (Windows path): the version's bundle is in a folder of its own."""

    @property
    def executable(self) -> str:
        return f"{version_dir(self.folder)}\\{EXECUTABLE}"

    @property
    def manifest(self) -> str:
        return f"{version_dir(self.folder)}\\{MANIFEST}"


@pytest.fixture(scope="module")
def installed_msi(lane: None, windows_profile: str) -> Iterator[InstalledMsi]:
    """The built MSI installed for the tests of one module, uninstalled after them; the
    prefix must hold no other install of it."""
    msi = built_msi()
    assert products() == [], "the lane's prefix already holds a Pedelec MSI"
    try:
        done = install(msi)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        yield InstalledMsi(msi, install_dir(windows_profile))
    finally:
        stop_wine()
        removed = uninstall(msi)
        assert removed.returncode == 0, removed.stderr.decode(errors="replace")
        assert products() == []
        stop_wine()


@pytest.fixture(params=["python", "msi"])
def windows_host(request: pytest.FixtureRequest) -> dict[str, str]:
    """How a test starts the host as Chrome does (`WineWorld.start_as_chrome` keywords):
    the lane's python.exe started directly, or the installed MSI's executable found
    through HKCU and started through cmd.exe."""
    if request.param == "python":
        return {"command": f'"{windows_path(LANE.python)}" -m native_host {OFFICIAL_ORIGIN}'}
    request.getfixturevalue("installed_msi")
    return {"registry_name": HOST_NAME}
