"""On the Windows lane, against Wine's real registry: `install`, `doctor` and `uninstall`
read both registry views, 32-bit first, as Chromium does; a re-install of an unchanged
install says "unchanged" (Windows keeps no mode bits to compare).

Values are planted and read back by Windows Python's own `winreg` with KEY_WOW64_32KEY /
KEY_WOW64_64KEY, so what is asserted is what Chrome's `RegOpenKeyEx` would see.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import HOST_NAME
from tests.support.wine import run_code
from tests.support.wine_world import WineWorld

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

CHROME_KEY = f"Software\\Google\\Chrome\\NativeMessagingHosts\\{HOST_NAME}"
STALE = "C:\\Program Files (x86)\\Old Host\\cc.isaaclin.pedelec.json"
VIEWS = ("32", "64")

REGISTRY = """
import json, sys, winreg
hive = {"HKCU": winreg.HKEY_CURRENT_USER, "HKLM": winreg.HKEY_LOCAL_MACHINE}[sys.argv[1]]
view = {"32": winreg.KEY_WOW64_32KEY, "64": winreg.KEY_WOW64_64KEY}
action, key = sys.argv[2], sys.argv[3]
if action == "read":
    found = {}
    for name, flag in view.items():
        try:
            with winreg.OpenKey(hive, key, 0, winreg.KEY_QUERY_VALUE | flag) as handle:
                found[name] = winreg.QueryValueEx(handle, "")[0]
        except FileNotFoundError:
            found[name] = None
    print(json.dumps(found))
elif action == "set":
    flag = view[sys.argv[4]]
    with winreg.CreateKeyEx(hive, key, 0, winreg.KEY_SET_VALUE | flag) as handle:
        winreg.SetValueEx(handle, "", 0, winreg.REG_SZ, sys.argv[5])
else:
    for flag in view.values():
        try:
            winreg.DeleteKeyEx(hive, key, flag, 0)
        except FileNotFoundError:
            pass
"""


def registry(hive: str, action: str, *args: str) -> dict[str, str | None]:
    code = f"import sys; sys.argv[1:] = {[hive, action, CHROME_KEY, *args]!r}\n{REGISTRY}"
    out = run_code(code)
    return json.loads(out) if action == "read" else {}


@pytest.fixture
def clean_keys(lane: None) -> Iterator[None]:
    """No host key in either view or hive before and after the test (one shared prefix)."""
    for hive in ("HKCU", "HKLM"):
        registry(hive, "delete")
    try:
        yield
    finally:
        for hive in ("HKCU", "HKLM"):
            registry(hive, "delete")


def out(done: object) -> str:
    stdout = getattr(done, "stdout", b"")
    stderr = getattr(done, "stderr", b"")
    assert getattr(done, "returncode", 1) == 0, stderr.decode(errors="replace")
    return stdout.decode(errors="replace")


def chrome_manifest_check(world: WineWorld) -> dict[str, str]:
    done = world.cli("doctor", "--json", "--browser", "chrome", "--timeout", "60")
    findings = json.loads(done.stdout)["findings"]
    return next(f for f in findings if f["check"] == "manifest present")


@pytest.mark.usefixtures("clean_keys")
def test_hkcu_install_wins_over_a_stale_32_bit_value_and_uninstall_restores_it(
    tmp_path: Path,
) -> None:
    world = WineWorld(tmp_path)
    try:
        registry("HKCU", "set", "32", STALE)
        assert registry("HKCU", "read")["32"] == STALE
        out(world.cli("install", "--browser", "chrome"))
        views = registry("HKCU", "read")
        ours = views["64"]
        assert ours is not None and ours.endswith(f"\\{HOST_NAME}.json")
        assert views["32"] == ours  # what Chrome reads first is ours
        present = chrome_manifest_check(world)
        assert present["status"] == "ok" and f"-> {ours}" in present["detail"], present

        out(world.cli("uninstall"))
        assert registry("HKCU", "read")["32"] == STALE
    finally:
        world.close()


@pytest.mark.usefixtures("clean_keys")
def test_hklm_install_takes_over_the_wow6432node_value_and_doctor_names_the_view(
    tmp_path: Path,
) -> None:
    """HKLM\\SOFTWARE is two keys on 64-bit Windows: the 32-bit view's value would shadow
    the key install writes, so install writes it too, and uninstall puts it back."""
    world = WineWorld(tmp_path)
    try:
        registry("HKLM", "set", "32", STALE)
        views = registry("HKLM", "read")
        assert views == {"32": STALE, "64": None}, "Wine should keep HKLM's views apart"
        installed = out(world.cli("install", "--scope", "system", "--browser", "chrome"))
        assert "(32-bit view)" in installed, installed
        views = registry("HKLM", "read")
        assert views["64"] is not None and views["32"] == views["64"], views
        present = chrome_manifest_check(world)
        assert present["detail"].startswith(f"HKLM\\{CHROME_KEY} (32-bit view) -> "), present

        out(world.cli("uninstall"))
        assert registry("HKLM", "read") == {"32": STALE, "64": None}
    finally:
        world.close()


@pytest.mark.usefixtures("clean_keys")
def test_reinstalling_an_unchanged_install_says_unchanged(tmp_path: Path) -> None:
    world = WineWorld(tmp_path)
    try:
        out(world.cli("install", "--browser", "chrome"))
        again = out(world.cli("install", "--browser", "chrome"))
        lines = [line for line in again.splitlines() if line.strip()]
        changes = [line for line in lines if line.split()[0] in ("wrote", "set", "updated")]
        assert not changes, again
        assert sum(line.startswith("unchanged") for line in lines) >= 3, again  # bat, json, key
        out(world.cli("uninstall"))
    finally:
        world.close()
