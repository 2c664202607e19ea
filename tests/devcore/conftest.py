"""Fixtures: dev Cores on a temporary home, line clients to them (tests/support/core_lines.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host.devcore import DevCore, DevCoreSettings, Faults
from tests.support.core_lines import ClientFactory, CoreFactory, LineClient


@pytest.fixture
def make_core(tmp_path: Path) -> Iterator[CoreFactory]:
    """Start dev Cores on `tmp_path/.pedelec`; all are stopped at teardown."""
    cores: list[DevCore] = []

    def factory(generation: str = "current", faults: Faults | None = None, **kw: Any) -> DevCore:
        settings = DevCoreSettings(
            home=kw.pop("home", tmp_path / ".pedelec"),
            generation=generation,
            faults=faults or Faults(),
            **kw,
        )
        core = DevCore(settings).start()
        cores.append(core)
        return core

    yield factory
    for core in cores:
        core.stop()


@pytest.fixture
def connect() -> Iterator[ClientFactory]:
    """Open line clients to a Core; all are closed at teardown."""
    clients: list[LineClient] = []

    def factory(core: DevCore) -> LineClient:
        client = LineClient(core.port)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.close()


@pytest.fixture(params=["legacy", "current"])
def generation(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def core(make_core: CoreFactory, generation: str) -> DevCore:
    """A dev Core of each generation in turn."""
    return make_core(generation)


@pytest.fixture
def client(core: DevCore, connect: ClientFactory) -> LineClient:
    return connect(core)


@pytest.fixture
def cur(make_core: CoreFactory) -> DevCore:
    """A current-generation dev Core."""
    return make_core("current")


@pytest.fixture
def cc(cur: DevCore, connect: ClientFactory) -> LineClient:
    return connect(cur)
