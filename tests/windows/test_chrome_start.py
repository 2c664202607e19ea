"""On the Windows lane: the host registered in HKCU (read back through `winreg`) and started
the way Chrome on Windows starts it, through `cmd.exe /d /s /c` with pipes: frames whose
length prefixes hold 0x0a, 0x0d and 0x1a (what text-mode pipes would mangle) arrive
whole, garbage gets its specific error, and the host exits when its stdin ends."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import HOST_NAME, startimage
from native_host.errors import MSG_NOT_JSON, STAGE_PARSE_MESSAGE, STAGE_READ_LAUNCH_CONFIG
from tests.support.wine import linux_path, run_code, windows_path
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

CHROME_KEY = f"Software\\Google\\Chrome\\NativeMessagingHosts\\{HOST_NAME}"
UNSAFE_LENGTH = 0x0A1A0D
"""A body length whose little-endian prefix is 0d 1a 0a 00: CR, Ctrl-Z, LF."""


def registered_manifest() -> str | None:
    """HKCU's value for the host, read by Windows Python's own `winreg`."""
    code = (
        "import winreg\n"
        "try:\n"
        f"    print(winreg.QueryValue(winreg.HKEY_CURRENT_USER, {CHROME_KEY!r}))\n"
        "except FileNotFoundError:\n"
        "    print('<none>')\n"
    )
    value = run_code(code).strip()
    return None if value == "<none>" else value


@pytest.fixture(scope="module")
def installed(lane: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WineWorld]:
    """One world with the host installed for Chrome in HKCU, uninstalled afterwards."""
    world = WineWorld(tmp_path_factory.mktemp("installed"))
    done = world.cli("install", "--browser", "chrome")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    try:
        yield world
    finally:
        world.close()
        world.cli("uninstall")


def test_install_registers_the_manifest_in_hkcu(installed: WineWorld) -> None:
    manifest = registered_manifest()
    assert manifest is not None and manifest.endswith(f"\\{HOST_NAME}.json")
    document = json.loads(linux_path(manifest).read_text())
    assert document["name"] == HOST_NAME
    assert document["path"].endswith(".bat")
    launcher = linux_path(document["path"])
    assert launcher.is_file()
    image = launcher.parent / startimage.IMAGE_NAME
    assert image.is_file() and image.name in launcher.read_text()


def test_started_through_cmd_frames_binary_safely_and_exits_on_eof(installed: WineWorld) -> None:
    host = installed.start_as_chrome(registry_name=HOST_NAME)
    garbage = (
        b"\r\n\x1a{" + b"\x1a\r\n" * ((UNSAFE_LENGTH - 4) // 3) + b"x" * ((UNSAFE_LENGTH - 4) % 3)
    )
    assert len(garbage) == UNSAFE_LENGTH and struct.pack("<I", UNSAFE_LENGTH) == b"\r\x1a\n\x00"
    host.send_body(garbage)
    answer = host.read(timeout=60)
    assert answer["ok"] is False and answer["error"]["message"] == MSG_NOT_JSON, answer
    assert answer["error"]["details"]["stage"] == STAGE_PARSE_MESSAGE
    # No Core and no app-launch.json: a request is answered with the staged error, so the
    # frame after the big one was read whole, from its own prefix.
    padded = {"type": "ping", "requestId": "after-garbage", "pad": ""}
    padded["pad"] = "\r\n\x1a" * ((0x0D0A - len(json.dumps(padded))) // 3)
    host.send(padded)
    response = host.response("after-garbage", timeout=60)
    assert response["ok"] is False, response
    assert response["error"]["details"]["stage"] == STAGE_READ_LAUNCH_CONFIG, response
    host.close_stdin()
    assert host.proc.wait(60) == 0, host.stderr


def test_started_through_cmd_answers_from_the_dev_core(
    installed: WineWorld, tmp_path: Path
) -> None:
    """The dev Core runs on Linux loopback; its pid means nothing under Wine, and Wine names
    no owner for its socket, so the world opts out of the pid check (docs/security.md)."""
    core_home = tmp_path / "core-home"
    installed.start_core(home=core_home)
    installed.write_config({"checkRuntimePid": False})
    host = installed.start_as_chrome(
        registry_name=HOST_NAME, env={"PEDELEC_HOME": windows_path(core_home)}
    )
    response = host.request({"type": "ping", "requestId": "core"}, timeout=60)
    assert response["ok"] is True, (response, host.stderr)
    assert response["result"]["connected"] is True
    # Every start through the registered .bat ran from the image install wrote beside it.
    logs = installed.dirs["PEDELEC_NATIVE_HOST_LOG_DIR"].glob("*.log")
    starts = re.findall(r" start pid=\d+ .* image=(\S+)", "".join(p.read_text() for p in logs))
    assert starts and set(starts) == {startimage.LOADED}, starts


def test_uninstall_leaves_no_key(lane: None, tmp_path: Path) -> None:
    world = WineWorld(tmp_path)
    try:
        assert world.cli("install", "--browser", "chrome").returncode == 0
        assert registered_manifest() is not None
        done = world.cli("uninstall")
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert registered_manifest() is None
    finally:
        world.close()
