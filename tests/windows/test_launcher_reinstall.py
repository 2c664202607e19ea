"""On the Windows lane: a launcher install (the lane's python.exe and its site-packages,
as pip, pipx or uv leave one) registered again, then removed, while one of its hosts
serves (issue 30). Windows refuses to rename or delete a file another process holds
open unless that process shares the deletion; the host holds its start image open for as
long as it runs, sharing it: `install` keeps the image in use under a retired name, and
`uninstall` removes what `install` wrote, each exiting 0, while the host answers
throughout. The retired image goes with the next host's exit (a Windows process cannot
tell its own handle from another's, so the last host of a version leaves it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from native_host import HOST_NAME, __version__, startimage, versions
from tests.support.host import HostUnderTest
from tests.support.wine import run_python
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]


@pytest.fixture
def registered(wine_world: WineWorld) -> Iterator[WineWorld]:
    """The lane's interpreter registered for Chrome (its launcher and image in the world's
    state folder), and a Core to relay to; unregistered afterwards, whatever happened."""
    wine_world.start_core()
    wine_world.write_config({"checkRuntimePid": False})
    done = install(wine_world)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    try:
        yield wine_world
    finally:
        run_python(["-m", "native_host", "uninstall"], env=wine_world.env)


def install(world: WineWorld) -> subprocess.CompletedProcess[bytes]:
    return run_python(["-m", "native_host", "install", "--browser", "chrome"], env=world.env)


def ping(host: HostUnderTest, request_id: str) -> None:
    answer = host.request({"type": "ping", "requestId": request_id}, timeout=60)
    assert answer["ok"] is True, answer


def test_install_again_and_uninstall_while_a_host_serves(registered: WineWorld) -> None:
    world = registered
    image = world.dirs["PEDELEC_NATIVE_HOST_STATE_DIR"] / startimage.IMAGE_NAME
    retired = image.with_name(f"{image.name}.{__version__}{versions.RETIRED}")
    host = world.start_as_chrome(registry_name=HOST_NAME)
    ping(host, "before")

    again = install(world)
    assert again.returncode == 0, again.stderr.decode(errors="replace")
    assert b"kept " in again.stdout and retired.is_file() and image.is_file()
    ping(host, "after install")

    removed = run_python(["-m", "native_host", "uninstall"], env=world.env)
    assert removed.returncode == 0, removed.stderr.decode(errors="replace")
    assert not image.exists()
    ping(host, "after uninstall")
    host.close_stdin()
    assert host.wait(60) == 0
    assert retired.is_file(), "the last host cannot tell its own handle from another's"

    assert install(world).returncode == 0
    host = world.start_as_chrome(registry_name=HOST_NAME)
    ping(host, "next")
    host.close_stdin()
    assert host.wait(60) == 0
    assert not retired.exists(), "the next host's exit removes the retired image"
