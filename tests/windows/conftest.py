"""The Windows lane's fixtures (tests/support/wine.py holds the helpers behind them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.wine import require_lane, run_code, stop_wine
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
