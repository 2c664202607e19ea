"""On the Windows lane: the per-user MSI packaging/windows/build.py wrote, installed by
Wine's msiexec (`installed_msi`), and what a user then has: a package that asks for no
elevation and ships nothing of the lane's; every browser key of the locations table naming
the manifest beside the executable; `doctor` from the installed executable saying the
registration is its own; every start through the registration relaying from the sealed
start image; `install` run from it registering the executable itself.

test_msi_lifecycle.py installs, upgrades and removes it; test_background_launch.py and
test_user_profile.py also start the installed executable through HKCU and cmd.exe.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import PureWindowsPath

import pytest

from native_host import OFFICIAL_EXTENSION_ID, __version__, startimage
from native_host.install import locations
from native_host.install.locations import Scope
from tests.support.msi import EXECUTABLE, MANIFEST, built_msi, read_key
from tests.support.wine import linux_path, wine_environment
from tests.support.wine_world import WineWorld
from tests.windows.conftest import InstalledMsi

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

NO_ELEVATION = 8
"""PID_WORDCOUNT bit: "elevated privileges are not required" (with 2, compressed)."""


def msi_table(name: str) -> list[list[str]]:
    """The rows of one table of the built MSI, as msitools exports them."""
    done = subprocess.run(
        ["msiinfo", "export", str(built_msi()), name], capture_output=True, text=True, check=True
    )
    return [line.split("\t") for line in done.stdout.splitlines()[3:]]


def host_keys() -> list[str]:
    """Every HKCU key `install` writes on Windows, from the locations table."""
    home = PureWindowsPath("C:/Users/user")
    keys = {t.registry_key.path for t in locations.targets("win32", {}, home, Scope.USER)
            if t.registry_key is not None}  # fmt: skip
    return sorted(keys)


def run_installed(
    installed: InstalledMsi, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The installed executable with `args`, to the end (every stdio a pipe)."""
    return subprocess.run(
        ["wine", str(linux_path(installed.executable)), *args],
        input=b"",
        capture_output=True,
        env=wine_environment(env),
        timeout=300,
        check=False,
    )


def test_the_package_needs_no_elevation_and_ships_no_part_of_the_lane(lane: None) -> None:
    done = subprocess.run(
        ["msiinfo", "suminfo", str(built_msi())], capture_output=True, text=True, check=True
    )
    # msitools prints PID_WORDCOUNT as "Source".
    (words,) = re.findall(r"^Source: (\d+)", done.stdout, flags=re.M)
    assert int(words) & NO_ELEVATION, done.stdout
    shipped = {row[2].split("|")[-1].lower() for row in msi_table("File")}
    assert {EXECUTABLE, MANIFEST, startimage.IMAGE_NAME, "python313.dll"} <= shipped
    # The shim of the lane's Wine, the interpreter used to build, what LEFT_OUT names.
    assert shipped.isdisjoint({"bcryptprimitives.dll", "python.exe", "pythonw.exe", "_ssl.pyd"})


def test_every_components_key_path_is_an_hkcu_value(lane: None) -> None:
    """Windows Installer's per-user rule (ICE38): a component under the profile is keyed
    on an HKCU value, never on a file; each removes its folder at uninstall (ICE64)."""
    registry = {row[0]: row for row in msi_table("Registry")}
    components = msi_table("Component")
    assert components
    for component, _guid, _folder, _attributes, _condition, key_path in components:
        assert key_path in registry, f"{component} is keyed on {key_path!r}, not a value"
        assert registry[key_path][1] == "1", f"{component}'s key path is not in HKCU"
    removed = {row[1] for row in msi_table("RemoveFile")}
    assert {row[0] for row in components if row[2] != "INSTALLDIR"} - removed <= {
        k for k in registry if k.startswith("k_")
    }


def test_every_browser_key_names_the_manifest_beside_the_executable(
    installed_msi: InstalledMsi,
) -> None:
    for key in host_keys():
        assert read_key(key) == installed_msi.manifest, key
    manifest = json.loads(linux_path(installed_msi.manifest).read_text())
    assert manifest["path"] == EXECUTABLE
    assert manifest["allowed_origins"] == [f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"]


def test_doctor_from_the_installed_executable_says_the_registration_is_its_own(
    installed_msi: InstalledMsi,
) -> None:
    done = run_installed(installed_msi, "doctor", "--json", "--browser", "chrome", "edge")
    assert b"Traceback" not in done.stdout + done.stderr, done.stderr
    findings = json.loads(done.stdout)["findings"]
    by_check = {(f["subject"], f["check"]): f for f in findings}
    for browser in ("chrome", "edge"):
        registered = by_check[(browser, "host registered")]
        assert registered["status"] == "ok", registered
        assert "which runs this doctor" in registered["detail"]
        assert by_check[(browser, "host answers ping")]["status"] == "ok"
        assert by_check[(browser, "official extension allowed")]["status"] == "ok"
    image = by_check[("install", "start image")]
    assert image["status"] == "ok" and "sealed in the bundle" in image["detail"], image


def test_every_start_through_the_registration_relays_from_the_sealed_image(
    installed_msi: InstalledMsi, wine_world: WineWorld
) -> None:
    wine_world.start_core()
    wine_world.write_config({"checkRuntimePid": False})
    for attempt in range(2):
        host = wine_world.start_as_chrome(registry_name="cc.isaaclin.pedelec")
        response = host.request({"type": "ping", "requestId": f"p{attempt}"}, timeout=60)
        assert response["ok"] is True, response
        host.close_stdin()
        assert host.wait(60) == 0
    log = "".join(p.read_text() for p in (wine_world.root / "logs").glob("*.log*"))
    starts = re.findall(r" start pid=\d+ version=(\S+) .* image=(\S+)", log)
    assert starts == [(__version__, startimage.LOADED)] * 2, log


def test_install_from_the_installed_executable_registers_it_and_uninstall_gives_back_the_msis(
    installed_msi: InstalledMsi, wine_world: WineWorld
) -> None:
    """A user with a self-built extension adds its id: the manifest `install` writes names
    this executable (a frozen bundle needs no launcher and no image), and `uninstall`
    points the key back at the MSI's manifest, which it replaced."""
    (row,) = locations.select_rows("win32", ["chrome"])
    assert row.registry_vendor is not None
    chrome = locations.registry_key_path(row.registry_vendor)
    other = "a" * 32
    done = run_installed(
        installed_msi, "install", "--browser", "chrome", "--extension-id", other,
        env=wine_world.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    registered = read_key(chrome)
    assert registered is not None and registered != installed_msi.manifest
    manifest = json.loads(linux_path(registered).read_text())
    assert PureWindowsPath(manifest["path"]) == PureWindowsPath(installed_msi.executable)
    assert f"chrome-extension://{other}/" in manifest["allowed_origins"]
    state = wine_world.dirs["PEDELEC_NATIVE_HOST_STATE_DIR"]
    assert not list(state.glob("*.bat")) and not list(state.glob("*.image"))
    removed = run_installed(installed_msi, "uninstall", env=wine_world.env)
    assert removed.returncode == 0, removed.stderr.decode(errors="replace")
    assert read_key(chrome) == installed_msi.manifest
    assert not linux_path(registered).exists()
