"""Sandboxed browsers in simulated homes: Flatpak-only, Snap-only, both, and native plus
sandboxed copies of one browser; `install` and `doctor` on each.

The Flatpak wrapper is run for real: with a stand-in `flatpak-spawn` on PATH (the real
one exists only inside a Flatpak runtime) that records its argv and runs the host, through
a full ping against the dev Core. The grant runs Debian's real `flatpak override`, which
CI installs (`apt-get install -y flatpak`); under CI a missing `flatpak` fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.devcore import DevCore, DevCoreSettings
from native_host.hostproc import HostProcess
from native_host.install import flatpak
from tests.support.machine import install_cli
from tests.support.markers import needs_os

pytestmark = [pytest.mark.process, needs_os("linux", reason="Flatpak browsers exist on Linux only")]

REPO = Path(__file__).resolve().parent.parent
OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
MANIFEST = f"{HOST_NAME}.json"
CHROME = "com.google.Chrome"
EXITED = '"Native host has exited."'
NOT_FOUND = '"Specified native messaging host not found."'

STAND_IN_SPAWN = """\
import json, os, sys
with open(os.environ["STAND_IN_SPAWN_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if "--host" not in args:
    sys.exit("stand-in flatpak-spawn: only --host is supported")
while args and args[0].startswith("--"):
    args.pop(0)
os.execv(args[0], args)
"""


def require_flatpak() -> str:
    path = shutil.which("flatpak")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must install Debian's flatpak package (apt-get install -y flatpak)")
        pytest.skip("flatpak is not installed (apt-get install -y flatpak)")
    return path


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [*args, "--force"] if args[0] == "install" else list(args)
    return subprocess.run(
        [sys.executable, "-m", "native_host", *argv],
        env=env, capture_output=True, text=True, timeout=90, cwd=REPO,
    )  # fmt: skip


def empty_machine(tmp_path: Path) -> Path:
    """System folders with no browser program in them: only the home's browsers count."""
    machine = tmp_path / "machine"
    machine.mkdir(exist_ok=True)
    return machine


def doctor(env: dict[str, str], *args: str) -> tuple[int, list[dict[str, str]]]:
    result = cli(env, "doctor", "--json", *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)["findings"]


def of(findings: list[dict[str, str]], subject: str, check: str) -> dict[str, str]:
    matches = [f for f in findings if (f["subject"], f["check"]) == (subject, check)]
    assert matches, f"no {subject}/{check} in {[(f['subject'], f['check']) for f in findings]}"
    return matches[0]


def flatpak_home(home: Path, app_id: str = CHROME, subdir: str = "google-chrome") -> Path:
    """A home where the Flatpak app has run once: its ~/.var/app config dir exists."""
    config = home / ".var" / "app" / app_id / "config" / subdir
    config.mkdir(parents=True)
    return config


def snap_home(home: Path, name: str = "chromium") -> Path:
    directory = home / "snap" / name / "common" / name
    directory.mkdir(parents=True)
    return directory


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["HOME"])


# --- the wrapper text ------------------------------------------------------------------
@pytest.mark.parametrize("host", ["/opt/host", "/home/a b/it's/host"])
def test_wrapper_names_the_host_it_starts(host: str) -> None:
    text = flatpak.wrapper_text(host).decode()
    assert text.startswith("#!/bin/sh\n")
    assert flatpak.wrapper_target(text) == host
    assert flatpak.wrapper_target("#!/bin/sh\nexec flatpak-spawn --host /x\n") is None


@pytest.mark.parametrize(
    ("text", "granted"),
    [
        ("[Session Bus Policy]\norg.freedesktop.Flatpak=talk\n", True),
        ("[Context]\nshared=network;\n\n[Session Bus Policy]\norg.freedesktop.Flatpak=own\n", True),
        ("[Session Bus Policy]\norg.freedesktop.Flatpak=none\n", False),
        ("[Session Bus Policy]\norg.freedesktop.Notifications=talk\n", False),
        ("[Context]\nsockets=x11;\n", False),
        ("not a key file", None),
    ],
)
def test_override_files_are_read_as_flatpak_writes_them(text: str, granted: bool | None) -> None:
    assert flatpak.grants_talk(text) is granted


# --- install ------------------------------------------------------------------------------
def test_flatpak_only_home_needs_the_explicit_opt_in(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    flatpak_home(home)
    result = install_cli(env, empty_machine(tmp_path), "install", "--force")
    assert result.returncode == 1
    assert "Google Chrome (Flatpak): not registered" in result.stderr
    assert "pass --flatpak" in result.stderr
    assert f"flatpak override --user --talk-name=org.freedesktop.Flatpak {CHROME}" in result.stderr
    assert not (tmp_path / "state").exists()


def test_install_flatpak_writes_the_manifest_and_wrapper_and_prints_the_grant(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    config = flatpak_home(home)
    result = cli(env, "install", "--flatpak")
    assert result.returncode == 0, result.stderr
    manifest_path = config / "NativeMessagingHosts" / MANIFEST
    wrapper = (
        home / ".var" / "app" / CHROME / "data" / "pedelec-native-host" / "pedelec-native-host"
    )
    launcher = tmp_path / "state" / "pedelec-native-host"
    assert json.loads(manifest_path.read_text())["path"] == str(wrapper)
    assert stat.S_IMODE(wrapper.stat().st_mode) == 0o700
    assert flatpak.wrapper_target(wrapper.read_text()) == str(launcher)
    line = next(x for x in result.stdout.splitlines() if x.startswith("flatpak"))
    assert f"`flatpak override --user --talk-name=org.freedesktop.Flatpak {CHROME}`" in line
    assert "start any program on your machine outside its sandbox" in line
    assert "--flatpak-grant" in line
    assert not (home / ".local" / "share" / "flatpak").exists()  # nothing granted


@pytest.fixture
def core(env: dict[str, str]) -> Iterator[DevCore]:
    server = DevCore(DevCoreSettings(home=Path(env["PEDELEC_HOME"]), generation="current"))
    server.start()
    yield server
    server.stop()


def test_the_wrapper_runs_the_host_through_flatpak_spawn_for_a_full_ping(
    tmp_path: Path, home: Path, env: dict[str, str], core: DevCore
) -> None:
    flatpak_home(home)
    assert cli(env, "install", "--flatpak").returncode == 0
    wrapper = (
        home / ".var" / "app" / CHROME / "data" / "pedelec-native-host" / "pedelec-native-host"
    )
    bin_dir = tmp_path / "sandbox-bin"
    bin_dir.mkdir()
    spawn = bin_dir / "flatpak-spawn"
    spawn.write_text(f"#!{sys.executable}\n{STAND_IN_SPAWN}")
    spawn.chmod(0o755)
    log = tmp_path / "spawn.log"
    run_env = {**env, "PATH": f"{bin_dir}:{env['PATH']}", "STAND_IN_SPAWN_LOG": str(log)}
    with HostProcess([str(wrapper)], [OFFICIAL], run_env, cwd=str(wrapper.parent)) as host:
        reply = host.request({"type": "ping", "requestId": "through-the-sandbox"}, timeout=15)
        assert reply["ok"] is True, reply
        assert reply["requestId"] == "through-the-sandbox"
        host.close_stdin()
        assert host.wait(5) == 0
    launcher = tmp_path / "state" / "pedelec-native-host"
    argv = [json.loads(line) for line in log.read_text().splitlines()]
    assert argv == [["--host", "--watch-bus", str(launcher), OFFICIAL]]


def test_flatpak_grant_runs_flatpak_override_and_uninstall_takes_it_back(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    require_flatpak()
    flatpak_home(home)
    result = cli(env, "install", "--flatpak", "--flatpak-grant")
    assert result.returncode == 0, result.stderr
    override = home / ".local" / "share" / "flatpak" / "overrides" / CHROME
    assert flatpak.grants_talk(override.read_text()) is True
    assert "granted" in result.stdout
    record = json.loads((tmp_path / "state" / "install-record.json").read_text())
    assert str(override) in [f["path"] for f in record["files"]]

    _, findings = doctor(env)
    assert of(findings, "chrome-flatpak", "flatpak permission")["status"] == "ok"
    assert of(findings, "chrome-flatpak", "wrapper inside the sandbox")["status"] == "ok"
    assert of(findings, "chrome-flatpak", "wrapper starts the host")["status"] == "ok"
    assert of(findings, "flatpak", "flatpak-spawn usable")["status"] == "ok"
    assert of(findings, "chrome-flatpak", "host answers ping")["status"] == "ok"
    assert of(findings, "chrome-flatpak", "host registered")["detail"].startswith("this host")

    again = cli(env, "install", "--flatpak", "--flatpak-grant")
    assert "already granted" in again.stdout
    undone = cli(env, "uninstall")
    assert undone.returncode == 0, undone.stderr
    assert not override.exists()
    assert not (home / ".var" / "app" / CHROME / "data" / "pedelec-native-host").exists()


def test_flatpak_grant_needs_flatpak(env: dict[str, str]) -> None:
    result = cli(env, "install", "--flatpak-grant")
    assert result.returncode == 2 and "--flatpak-grant needs --flatpak" in result.stderr


def test_a_failing_grant_is_reported_and_fails_the_install(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    flatpak_home(home)
    no_flatpak = {**env, "PATH": str(tmp_path / "empty-bin")}
    (tmp_path / "empty-bin").mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "install", "--flatpak", "--flatpak-grant", "--force"],
        env=no_flatpak, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 1
    assert "failed" in result.stdout and "flatpak override" in result.stdout
    assert "could not be granted" in result.stderr


# --- doctor ---------------------------------------------------------------------------------
def test_doctor_on_a_flatpak_without_the_permission_fails_with_the_fix(
    home: Path, env: dict[str, str]
) -> None:
    flatpak_home(home)
    assert cli(env, "install", "--flatpak").returncode == 0
    code, findings = doctor(env)
    permission = of(findings, "chrome-flatpak", "flatpak permission")
    assert permission["status"] == "fail"
    assert permission["symptom"] == EXITED
    assert (
        f"flatpak override --user --talk-name=org.freedesktop.Flatpak {CHROME}"
        in (permission["hint"])
    )
    assert code == 1


def test_doctor_without_flatpaks_session_helper_fails(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    flatpak_home(home)
    assert cli(env, "install", "--flatpak").returncode == 0
    bare = {**env, "XDG_DATA_DIRS": str(tmp_path / "no-data"), "XDG_DATA_HOME": str(tmp_path)}
    code, findings = doctor(bare)
    helper = of(findings, "flatpak", "flatpak-spawn usable")
    assert helper["status"] == "fail" and "org.freedesktop.Flatpak" in helper["detail"]
    assert "flatpak" in helper["hint"]
    assert code == 1


def test_doctor_finds_flatpaks_session_helper_here(home: Path, env: dict[str, str]) -> None:
    require_flatpak()
    flatpak_home(home)
    assert cli(env, "install", "--flatpak").returncode == 0
    _, findings = doctor(env)
    helper = of(findings, "flatpak", "flatpak-spawn usable")
    assert helper["status"] == "ok"
    assert helper["detail"].endswith("org.freedesktop.Flatpak.service")


def test_doctor_refuses_a_flatpak_manifest_naming_a_path_outside_the_sandbox(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    config = flatpak_home(home)
    host = tmp_path / "bin" / "host"
    host.parent.mkdir()
    host.write_text("#!/bin/sh\n")
    host.chmod(0o755)
    manifest: dict[str, Any] = {
        "name": HOST_NAME, "description": "x", "path": str(host), "type": "stdio",
        "allowed_origins": [OFFICIAL],
    }  # fmt: skip
    (config / "NativeMessagingHosts").mkdir()
    (config / "NativeMessagingHosts" / MANIFEST).write_text(json.dumps(manifest))
    code, findings = doctor(env, "--browser", "chrome-flatpak")
    inside = of(findings, "chrome-flatpak", "wrapper inside the sandbox")
    assert inside["status"] == "fail" and inside["symptom"] == NOT_FOUND
    assert "host answers ping" not in [f["check"] for f in findings]
    assert code == 1


def test_snap_only_home(tmp_path: Path, home: Path, env: dict[str, str]) -> None:
    snap_home(home)
    result = install_cli(env, empty_machine(tmp_path), "install", "--force")
    assert result.returncode == 1
    assert "Chromium (Snap): not registered" in result.stderr
    assert ".deb or vendor package" in result.stderr and "--flatpak" in result.stderr
    assert not (tmp_path / "state").exists()
    code, findings = doctor(env)
    snap = of(findings, "chromium-snap", "sandbox")
    assert snap["status"] == "fail" and "Snap confinement" in snap["detail"]
    assert "--flatpak" in snap["hint"]
    assert code == 1
    explicit = cli(env, "install", "--browser", "chromium-snap")
    assert explicit.returncode == 1 and "Snap" in explicit.stderr


def test_snap_and_flatpak_in_one_home(home: Path, env: dict[str, str], tmp_path: Path) -> None:
    require_flatpak()
    snap_home(home)
    flatpak_home(home, "org.chromium.Chromium", "chromium")
    without = install_cli(env, empty_machine(tmp_path), "install", "--force")
    assert without.returncode == 1
    assert "Chromium (Snap)" in without.stderr and "Chromium (Flatpak)" in without.stderr
    result = cli(env, "install", "--flatpak", "--flatpak-grant")
    assert result.returncode == 0, result.stderr
    skipped = [line for line in result.stdout.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 1 and "Chromium (Snap)" in skipped[0]
    code, findings = doctor(env)
    assert of(findings, "chromium-flatpak", "host answers ping")["status"] == "ok"
    assert of(findings, "chromium-snap", "sandbox")["status"] == "fail"
    assert code == 1  # the Snap cannot work: never a false ok
    _, findings = doctor(env, "--browser", "chromium-flatpak")
    failed = {f["subject"] for f in findings if f["status"] == "fail"}
    assert failed == {"core"}, findings  # no Desktop here; the browser side is all ok


def test_native_and_flatpak_copies_of_one_browser(home: Path, env: dict[str, str]) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    config = flatpak_home(home, "org.chromium.Chromium", "chromium")
    result = cli(env, "install")
    assert result.returncode == 0, result.stderr
    assert (home / ".config" / "chromium" / "NativeMessagingHosts" / MANIFEST).is_file()
    assert not (config / "NativeMessagingHosts").exists()
    assert "Chromium (Flatpak): not registered" in result.stdout
    code, findings = doctor(env)
    assert of(findings, "chromium", "host answers ping")["status"] == "ok"
    missing = of(findings, "chromium-flatpak", "manifest present")
    assert missing["status"] == "fail"
    assert "install --flatpak --browser chromium-flatpak" in missing["hint"]
    assert code == 1
