"""macOS: the Desktop's `.app` is opened through LaunchServices, its bundle trust-checked.

Never run on macOS: this machine is Linux. What is tested here is what does not need
LaunchServices — the bundle found from `executablePath`, the `open` command line built,
the Info.plist checks — with `spawn.LAUNCH_SERVICES` switched on and `/usr/bin/open`
replaced by a script that records its argv. tests/fixtures/macos/Info.plist is shaped like
a Tauri app's (the keys Tauri writes, `CFBundleExecutable` naming the binary), not copied
from a real Pedelec.app.
"""

from __future__ import annotations

import json
import os
import plistlib
import time
from pathlib import Path

import pytest

from native_host import errors
from native_host.launch import config, macos, spawn, trust
from tests.support.markers import POSIX, needs_os

pytestmark = [
    pytest.mark.process,
    needs_os(*POSIX, reason="the fake app and `open` are #! scripts"),
]

INFO_PLIST = (Path(__file__).parent / "fixtures" / "macos" / "Info.plist").read_bytes()


@pytest.mark.parametrize(
    ("executable", "bundle"),
    [
        ("/Applications/Pedelec.app/Contents/MacOS/pedelec-app", "/Applications/Pedelec.app"),
        (
            "/Users/O'Brien José/Applications/Pedelec Beta.app/Contents/MacOS/pedelec-app",
            "/Users/O'Brien José/Applications/Pedelec Beta.app",
        ),
        ("/usr/local/bin/pedelec-app", None),
        ("/Applications/Pedelec.app/Contents/Resources/pedelec-app", None),
        ("/Applications/Pedelec/Contents/MacOS/pedelec-app", None),
        ("/Applications/.app/Contents/MacOS/pedelec-app", None),
    ],
)
def test_the_bundle_is_the_app_whose_main_executable_is_configured(
    executable: str, bundle: str | None
) -> None:
    assert macos.app_bundle(executable) == bundle


def test_open_runs_the_bundle_in_the_background_hidden_with_the_background_flag() -> None:
    assert macos.open_argv("/Applications/Pedelec.app", ["--background"]) == [
        "/usr/bin/open", "-g", "-j", "-a", "/Applications/Pedelec.app", "--args", "--background",
    ]  # fmt: skip


def test_elsewhere_the_program_itself_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spawn, "LAUNCH_SERVICES", False)
    assert spawn.bundle_to_open("/Applications/Pedelec.app/Contents/MacOS/pedelec-app") is None


# --- with a bundle on disk --------------------------------------------------------------
def make_bundle(root: Path, plist: bytes = INFO_PLIST) -> Path:
    """`<root>/Pedelec.app` with an executable that leaves a mark if it is ever run."""
    macos_dir = root / "Pedelec.app" / "Contents" / "MacOS"
    macos_dir.mkdir(parents=True)
    for directory in (root, macos_dir.parents[1], macos_dir.parent, macos_dir):
        directory.chmod(0o700)
    executable = macos_dir / "pedelec-app"
    executable.write_text(f"#!/bin/sh\ntouch '{root / 'app-ran-directly'}'\n")
    executable.chmod(0o700)
    info = root / "Pedelec.app" / "Contents" / "Info.plist"
    info.write_bytes(plist)
    info.chmod(0o600)
    return executable


def launch_config(tmp_path: Path, executable: Path) -> Path:
    path = tmp_path / "app-launch.json"
    document = {"version": 1, "executablePath": str(executable), "backgroundArgs": ["--background"]}
    path.write_text(json.dumps(document))
    path.chmod(0o600)
    return path


@pytest.fixture
def on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spawn, "LAUNCH_SERVICES", True)


@pytest.mark.usefixtures("on_macos")
@pytest.mark.parametrize("fmt", [plistlib.FMT_XML, plistlib.FMT_BINARY])
def test_a_bundle_whose_info_plist_names_the_executable_is_accepted(
    tmp_path: Path, fmt: plistlib.PlistFormat
) -> None:
    plist = plistlib.dumps(plistlib.loads(INFO_PLIST), fmt=fmt)
    executable = make_bundle(tmp_path / "apps", plist)
    launch = config.read_launch_config(launch_config(tmp_path, executable), dict(os.environ))
    assert launch.executable_path == str(executable)


def refusal(tmp_path: Path, executable: Path) -> dict[str, object]:
    with pytest.raises(errors.HostError) as caught:
        config.read_launch_config(launch_config(tmp_path, executable), dict(os.environ))
    assert caught.value.details["reason"] == config.REASON_INVALID
    return caught.value.details


@pytest.mark.usefixtures("on_macos")
def test_an_info_plist_naming_another_executable_is_refused(tmp_path: Path) -> None:
    """LaunchServices starts what Info.plist names: a checked `pedelec-app` beside an
    unchecked `CFBundleExecutable` would run the unchecked one."""
    other = plistlib.dumps({**plistlib.loads(INFO_PLIST), "CFBundleExecutable": "payload"})
    details = refusal(tmp_path, make_bundle(tmp_path / "apps", other))
    assert details["violation"] == "executablePath"
    assert "'payload'" in str(details["error"])


@pytest.mark.usefixtures("on_macos")
def test_an_info_plist_others_can_write_is_refused(tmp_path: Path) -> None:
    executable = make_bundle(tmp_path / "apps")
    (executable.parents[1] / "Info.plist").chmod(0o666)
    assert refusal(tmp_path, executable)["violation"] == "executablePermissions"


@pytest.mark.usefixtures("on_macos")
@pytest.mark.parametrize("plist", [None, b"", b"<plist><dict><key>", b"bplist00\xff", b"#!/x\n"])
def test_a_missing_or_unparsable_info_plist_is_refused(tmp_path: Path, plist: bytes | None) -> None:
    executable = make_bundle(tmp_path / "apps", plist or b"")
    if plist is None:
        (executable.parents[1] / "Info.plist").unlink()
    assert refusal(tmp_path, executable)["violation"] in ("executablePath", "interpreter")


@pytest.mark.usefixtures("on_macos")
def test_the_executable_is_still_checked_first(tmp_path: Path) -> None:
    executable = make_bundle(tmp_path / "apps")
    executable.chmod(0o777)
    assert refusal(tmp_path, executable)["violation"] == "executablePermissions"


def fake_open(path: Path, record: Path) -> Path:
    path.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "{record}.tmp"\n'
                    f'mv "{record}.tmp" "{record}"\n')  # fmt: skip
    path.chmod(0o700)
    return path


@pytest.mark.usefixtures("on_macos")
def test_spawn_opens_the_bundle_through_launchservices_not_the_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = make_bundle(tmp_path / "apps")
    record = tmp_path / "open-argv"
    monkeypatch.setattr(macos, "OPEN", str(fake_open(tmp_path / "open", record)))
    program = trust.open_trusted(str(executable), os.environ)
    try:
        spawn.spawn_detached(program, [str(executable), "--background"], str(tmp_path), {})
    finally:
        program.close()
    deadline = time.monotonic() + 30
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    bundle = str(executable.parents[2])
    assert record.read_text().splitlines() == ["-g", "-j", "-a", bundle, "--args", "--background"]
    assert not (tmp_path / "apps" / "app-ran-directly").exists()


@pytest.mark.usefixtures("on_macos")
def test_an_open_others_can_write_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = make_bundle(tmp_path / "apps")
    record = tmp_path / "open-argv"
    opener = fake_open(tmp_path / "open", record)
    opener.chmod(0o777)
    monkeypatch.setattr(macos, "OPEN", str(opener))
    program = trust.open_trusted(str(executable), os.environ)
    try:
        with pytest.raises(OSError, match="refusing to run"):
            spawn.spawn_detached(program, [str(executable), "--background"], str(tmp_path), {})
    finally:
        program.close()
    assert not record.exists()
