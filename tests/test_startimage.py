"""The launcher's start image (issue 19, native_host/startimage.py), through the real
launcher `install` writes and the real host process against a dev Core.

The package is copied into a directory of its own (as a lasting install has it in its
site directory), the image is built by the interpreter that runs the launcher, and the
launcher is the `#!` script of `contents.launcher_text`. What a start did with its image
is read off the host's first log line (`image=<state>`) and off `-X importtime`, which
lists every module the import system had to find.
"""

from __future__ import annotations

import marshal
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from native_host import startimage
from native_host.hostproc import OFFICIAL_ORIGIN, HostProcess
from native_host.install.contents import IMAGE_ENTRY, interpreter_options, launcher_text
from native_host.install.doctor.cli import Doctor
from native_host.install.doctor.report import Status
from native_host.install.locations import Os
from native_host.install.record import START_IMAGE, FileEntry, InstallRecord
from tests.support.markers import POSIX, needs_os
from tests.support.users import skip_unless_root, throwaway_users
from tests.support.world import HostWorld

pytestmark = [
    pytest.mark.process,
    needs_os(*POSIX, reason="the launcher is a #! script (the Windows lane runs the .bat)"),
]

REPO = Path(__file__).resolve().parent.parent
READ_FIRST = {"native_host", "native_host.cli", "native_host.startimage", "native_host.files"}
"""What a start imports before it can read its image."""


class Install:
    """A copy of the package in its own site directory, its image and its launcher."""

    def __init__(self, root: Path) -> None:
        self.site = root / "site"
        shutil.copytree(
            REPO / "native_host",
            self.site / "native_host",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        self.image = root / "launcher-dir" / startimage.IMAGE_NAME
        self.image.parent.mkdir(mode=0o700)
        paths = [str(self.site)]
        options = interpreter_options(paths)
        self.image.write_bytes(startimage.build(sys.executable, options, paths))
        self.launcher = self.image.parent / "pedelec-native-host"
        self.launcher.write_bytes(
            launcher_text(Os.LINUX, sys.executable, [str(self.site)], image=str(self.image))
        )
        self.launcher.chmod(0o700)

    def traced(self) -> list[str]:
        """The launcher's command, under `-X importtime`."""
        entry = IMAGE_ENTRY.format(image=repr(str(self.image)))
        code = f"import sys; sys.path += [{str(self.site)!r}]; {entry.removeprefix('import sys; ')}"
        return [sys.executable, "-X", "importtime", "-I", "-S", "-c", code]


@pytest.fixture
def install(tmp_path: Path) -> Install:
    return Install(tmp_path)


def start_and_ping(world: HostWorld, command: list[str]) -> tuple[str, str]:
    """The state the host logged for its image, and its stderr, after one ping."""
    with HostProcess(command, (OFFICIAL_ORIGIN,), world.env, cwd=str(world.root)) as host:
        assert host.request({"type": "ping", "requestId": "p"})["ok"] is True
        host.close_stdin()
        assert host.wait() == 0
        stderr = host.final_stderr(timeout=10)
    states = re.findall(r" start pid=\d+ .* image=(\S+)", world.log_text())
    assert states, world.log_text()
    return states[-1], stderr


def found_by_importlib(stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[-1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line and "cumulative" not in line
    }


def test_a_ping_through_the_image_finds_none_of_its_modules_on_disk(
    world: HostWorld, install: Install
) -> None:
    world.start_core("current")
    held = {entry[0] for entry in startimage.read(str(install.image))}
    # What a relay start needs, of the package's and of the standard library's.
    assert {"native_host.relay", "native_host.gateway", "native_host.core.peer"} <= held
    assert {"json", "json.decoder", "re", "enum"} <= held
    assert held.isdisjoint(READ_FIRST)
    state, stderr = start_and_ping(world, install.traced())
    assert state == startimage.LOADED
    imported = found_by_importlib(stderr)
    assert sorted(imported & held) == [], "modules of the image were imported from disk"
    assert {n for n in imported if n.startswith("native_host")} == READ_FIRST


def test_the_launcher_install_writes_relays_through_its_image(
    world: HostWorld, install: Install
) -> None:
    world.start_core("current")
    assert start_and_ping(world, [str(install.launcher)])[0] == startimage.LOADED


def test_a_source_changed_since_install_runs_and_the_image_is_left_unused(
    world: HostWorld, install: Install
) -> None:
    """An upgrade without a new `install`: the new code runs, never the image's old one."""
    world.start_core("current")
    relay = install.site / "native_host" / "relay.py"
    relay.write_text(relay.read_text() + '\nsys.stderr.write("the edited relay ran\\n")\n')
    state, stderr = start_and_ping(world, [str(install.launcher)])
    assert state == startimage.STALE
    assert "the edited relay ran" in stderr
    with pytest.raises(startimage.ImageUnusable) as refused:
        startimage.read(str(install.image))
    assert refused.value.detail == "native_host.relay changed since install: install again"


def test_a_standard_library_upgrade_leaves_the_image_unused(
    world: HostWorld, install: Install, tmp_path: Path
) -> None:
    """The image holds json and re as this Python had them: a source with another size
    or time (a Python upgrade) voids it. Replayed on an image whose json entry names a
    copy of the module that then changes."""
    world.start_core("current")
    entries = list(startimage.read(str(install.image)))
    index = next(i for i, entry in enumerate(entries) if entry[0] == "json.encoder")
    name, origin, package, mtime_ns, size, code = entries[index]
    copy = tmp_path / "encoder.py"
    shutil.copy2(origin, copy)
    entries[index] = (name, str(copy), package, mtime_ns, size, code)
    header = install.image.read_bytes()[: len(startimage._header())]
    install.image.write_bytes(header + marshal.dumps(tuple(entries)))
    assert start_and_ping(world, [str(install.launcher)])[0] == startimage.LOADED
    os.utime(copy, ns=(mtime_ns, mtime_ns + 1_000_000_000))
    assert start_and_ping(world, [str(install.launcher)])[0] == startimage.STALE


ANOTHER_USERS = pytest.param(
    "another user's", marks=needs_os("linux", reason="throwaway users through useradd")
)


@pytest.mark.parametrize("plant", ["writable by others", "symlink", ANOTHER_USERS])
def test_an_image_someone_else_could_have_written_is_never_executed(
    world: HostWorld, install: Install, tmp_path: Path, plant: str
) -> None:
    world.start_core("current")
    if plant == "symlink":
        real = tmp_path / "elsewhere.image"
        install.image.rename(real)
        install.image.symlink_to(real)
    elif plant == "another user's":
        skip_unless_root()
        with throwaway_users() as make_user:
            mallory = make_user()
            os.chown(install.image, mallory.uid, mallory.gid)
            state, _ = start_and_ping(world, install.traced())
        assert state == startimage.REFUSED
        return
    else:
        install.image.chmod(0o666)
    state, _ = start_and_ping(world, install.traced())
    assert state == startimage.REFUSED
    with pytest.raises(startimage.ImageUnusable) as refused:
        startimage.read(str(install.image))
    assert refused.value.state == startimage.REFUSED


@pytest.mark.parametrize(
    ("damage", "state"),
    [
        ("truncated", startimage.DAMAGED),
        ("garbage", startimage.DAMAGED),
        ("not modules", startimage.DAMAGED),
        ("text in place of code", startimage.DAMAGED),
        ("another interpreter", startimage.FOREIGN),
        ("empty", startimage.FOREIGN),
    ],
)
def test_a_damaged_or_foreign_image_is_left_unused(
    world: HostWorld, install: Install, tmp_path: Path, damage: str, state: str
) -> None:
    world.start_core("current")
    data = install.image.read_bytes()
    header = data[: len(startimage._header())]
    first = startimage.read(str(install.image))[0]
    ran = tmp_path / "the text ran"
    text = f"open({str(ran)!r}, 'w').close()"
    damaged = {
        "truncated": data[: len(header) + (len(data) - len(header)) // 2],
        "garbage": header + b"\xff" * 64,
        "not modules": header + marshal.dumps(({"a": 1},)),
        "text in place of code": header + marshal.dumps(((*first[:5], text),)),
        "another interpreter": bytes([data[0] ^ 1]) + data[1:],
        "empty": b"",
    }[damage]
    install.image.write_bytes(damaged)
    assert start_and_ping(world, [str(install.launcher)])[0] == state
    assert not ran.exists()


def test_a_missing_image_is_named_and_the_host_still_answers(
    world: HostWorld, install: Install
) -> None:
    world.start_core("current")
    install.image.unlink()
    assert start_and_ping(world, [str(install.launcher)])[0] == startimage.MISSING


def test_doctor_reports_an_image_the_start_would_leave_unused(
    install: Install, env: dict[str, str], tmp_path: Path
) -> None:
    entry = FileEntry(path=str(install.image), role=START_IMAGE, sha256="")
    doctor = Doctor(sys.platform, env, tmp_path / "home", record=InstallRecord(files=[entry]))
    doctor.check_image()
    (ready,) = doctor.findings
    assert ready.status is Status.OK and "every source unchanged" in ready.detail
    (install.site / "native_host" / "gateway.py").write_text("# an upgrade\n")
    doctor.findings.clear()
    doctor.check_image()
    (stale,) = doctor.findings
    assert stale.status is Status.WARN
    assert "stale: native_host.gateway changed since install" in stale.detail
    assert "install` again" in stale.hint
