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
from native_host.install.doctor.cli import Doctor
from native_host.install.doctor.report import Status
from native_host.install.record import START_IMAGE, FileEntry, InstallRecord
from tests.support.markers import POSIX, needs_os
from tests.support.site_dir import READ_FIRST, Install, image_bytes, image_parts
from tests.support.users import skip_unless_root, throwaway_users
from tests.support.world import HostWorld

pytestmark = [
    pytest.mark.process,
    needs_os(*POSIX, reason="the launcher is a #! script (the Windows lane runs the .bat)"),
]


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
    image = startimage.read(str(install.image))
    at_start = {entry[0] for entry in image.start}
    held = image.names()
    # What a relay start needs, of the package's and of the standard library's.
    assert {"native_host.relay", "native_host.gateway", "native_host.core.peer"} <= at_start
    assert {"json", "json.decoder", "re", "enum"} <= at_start
    # What it may need later, held until then (issue 30).
    later = {"native_host.policy", "native_host.subscriptions", "native_host.launch.launcher"}
    assert later | {"idna", "idna.uts46data", "subprocess", "threading"} <= held - at_start
    assert held.isdisjoint(READ_FIRST)
    state, stderr = start_and_ping(world, install.traced())
    assert state == startimage.LOADED
    imported = found_by_importlib(stderr)
    assert sorted(imported & at_start) == [], "modules of the image were imported from disk"
    # The import system ran for what a start reads first, and, as the relay exits, for
    # `versions`, which the image holds (served from it, not from disk).
    assert {n for n in imported if n.startswith("native_host")} == READ_FIRST | {
        "native_host.versions"
    }


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
    image = startimage.read(str(install.image))
    entries = list(image.start)
    index = next(i for i, entry in enumerate(entries) if entry[0] == "json.encoder")
    name, origin, package, mtime_ns, size, code = entries[index]
    copy = tmp_path / "encoder.py"
    shutil.copy2(origin, copy)
    entries[index] = (name, str(copy), package, mtime_ns, size, code)
    header, _, held, code = image_parts(install.image)
    install.image.write_bytes(image_bytes(header, (tuple(entries), held), code))
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
        ("not two lists", startimage.DAMAGED),
        ("text in place of code", startimage.DAMAGED),
        ("held code outside it", startimage.DAMAGED),
        ("another interpreter", startimage.FOREIGN),
        ("empty", startimage.FOREIGN),
    ],
)
def test_a_damaged_or_foreign_image_is_left_unused(
    world: HostWorld, install: Install, tmp_path: Path, damage: str, state: str
) -> None:
    world.start_core("current")
    data = install.image.read_bytes()
    header, start, held, code = image_parts(install.image)
    first = start[0]
    ran = tmp_path / "the text ran"
    text = f"open({str(ran)!r}, 'w').close()"
    index_end = len(data) - len(code)
    damaged = {
        "truncated": data[: index_end // 2],
        "garbage": header + b"\xff" * 64,
        "not modules": image_bytes(header, (({"a": 1},), ())),
        "not two lists": image_bytes(header, (first,)),
        "text in place of code": image_bytes(header, (((*first[:5], text),), ())),
        "held code outside it": image_bytes(header, (start, ((*held[0][:5], len(code), 9),)), code),
        "another interpreter": bytes([data[0] ^ 1]) + data[1:],
        "empty": b"",
    }[damage]
    install.image.write_bytes(damaged)
    assert start_and_ping(world, [str(install.launcher)])[0] == state
    assert not ran.exists()


def test_held_code_that_is_not_code_never_runs(install: Install, tmp_path: Path) -> None:
    """A held module is checked when it is first imported: text in place of its code is
    refused there (ImportError), never compiled and run."""
    ran = tmp_path / "the text ran"
    header, start, held, code = image_parts(install.image)
    text = marshal.dumps(f"open({str(ran)!r}, 'w').close()")
    policy = next(e for e in held if e[0] == "native_host.policy")
    planted = tuple((*e[:5], len(code), len(text)) if e is policy else e for e in held)
    install.image.write_bytes(image_bytes(header, (start, planted), code + text))
    image = startimage.read(str(install.image), hold=True)
    finder = startimage.HeldModules(image)
    module = type(sys)("native_host.policy")
    with pytest.raises(ImportError, match=r"the start image's native_host\.policy is not code"):
        finder.exec_module(module)
    assert not ran.exists()
    assert image.fd is not None
    os.close(image.fd)


def test_held_code_is_read_from_the_file_opened_at_start(install: Install) -> None:
    """The held modules' code comes from the image the host opened, even when `install`
    has replaced the image since; an image changed in place refuses them."""
    image = startimage.read(str(install.image), hold=True)
    finder = startimage.HeldModules(image)
    install.write_image()  # a new image, renamed into place
    module = type(sys)("ipaddress")
    finder.exec_module(module)
    assert module.IPv6Address is not None
    assert image.fd is not None
    with open(f"/proc/self/fd/{image.fd}", "r+b") as same_file:
        same_file.seek(0, os.SEEK_END)
        same_file.write(b"more")
    with pytest.raises(ImportError, match="the start image changed since this host started"):
        finder.exec_module(type(sys)("ipaddress"))
    os.close(image.fd)


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
