"""The macOS packages' `postinstall` (packaging/macos/pkg_plan.py), run by a real POSIX
sh as Installer runs it: the per-user one registers the host it was installed with, from
the home the payload went into, and refuses any other install; the system one registers
it for every user, as root, from the system's own folder, and refuses anything else.
(Installer itself, and the macOS sh, run only on the release workflow's macOS runner.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.markers import POSIX, needs_os
from tests.support.release_scripts import release_module

pytestmark = [pytest.mark.process, needs_os(*POSIX, reason="runs the script with /bin/sh")]

pkg_plan = release_module("macos", "pkg_plan")
OTHER_UID = 4242
VERSION = "0.1.0"
INSTALL_LOCATION = pkg_plan.install_location(VERSION)


def installed(home: Path, version: str = VERSION) -> tuple[Path, Path]:
    """A home with the payload in place: the 'host' records its arguments and HOME."""
    destination = home / pkg_plan.install_location(version).lstrip("/")
    destination.mkdir(parents=True)
    record = home.parent / "ran.txt"
    host = destination / pkg_plan.EXECUTABLE
    host.write_text(f'#!/bin/sh\nprintf "%s|" "$HOME" "$@" > "{record}"\n')
    host.chmod(0o755)
    return destination, record


def postinstall(
    tmp_path: Path, destination: str, target: str = "/", version: str = VERSION
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "postinstall"
    script.write_text(pkg_plan.postinstall_script(version))
    script.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/var/empty"}
    return subprocess.run(
        ["/bin/sh", str(script), str(tmp_path / "x.pkg"), destination, target, "/"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60,
        check=False,
    )  # fmt: skip


def test_it_registers_the_installed_host_for_every_browser_from_that_home(tmp_path: Path) -> None:
    home = tmp_path / "Users" / "ann"
    destination, record = installed(home)
    done = postinstall(tmp_path, str(destination))
    assert done.returncode == 0, done.stderr
    assert record.read_text() == f"{home}|install|--browser|all|"


def test_a_destination_given_without_the_home_is_taken_under_the_target(tmp_path: Path) -> None:
    """Should Installer pass the install location as packaged and the home as the
    target, the home still comes from the install itself (a trailing slash or not)."""
    home = tmp_path / "Users" / "ann"
    _, record = installed(home)
    done = postinstall(tmp_path, INSTALL_LOCATION + "/", f"{home}/")
    assert done.returncode == 0, done.stderr
    assert record.read_text() == f"{home}|install|--browser|all|"


def test_a_home_with_a_space_and_quotes_in_its_name(tmp_path: Path) -> None:
    home = tmp_path / "Users" / 'ann o\'brien "x"'
    destination, record = installed(home)
    done = postinstall(tmp_path, str(destination))
    assert done.returncode == 0, done.stderr
    assert record.read_text() == f"{home}|install|--browser|all|"


@pytest.mark.parametrize(
    "where",
    [
        INSTALL_LOCATION,  # the system domain: no home before it, target "/"
        INSTALL_LOCATION + "/",
        "/Applications/pedelec-native-host",
        "",
    ],
)
def test_anything_but_a_home_install_is_refused(tmp_path: Path, where: str) -> None:
    done = postinstall(tmp_path, where)
    assert done.returncode == 1
    assert "not installed into a user's home" in done.stderr


def test_it_refuses_to_register_into_another_users_home(tmp_path: Path) -> None:
    """Root (or anyone) running the package into a home it does not own would write
    files there that the home's user does not own. As root the home is handed to another
    uid; otherwise a folder root owns (/usr) stands for another user's home."""
    if os.geteuid() == 0:
        home = tmp_path / "Users" / "bob"
        destination, record = installed(home)
        os.chown(home, OTHER_UID, OTHER_UID)
    else:
        home, record = Path("/usr"), tmp_path / "ran.txt"
        destination = home / INSTALL_LOCATION.lstrip("/")
    done = postinstall(tmp_path, str(destination))
    assert done.returncode == 1
    assert f"in {home}, which is another user's home" in done.stderr
    assert not record.exists()


def test_a_newer_package_registers_its_own_folder_and_leaves_the_older_as_it_was(
    tmp_path: Path,
) -> None:
    """The upgrade: the newer payload went into its own folder beside the older one; its
    postinstall runs the newer host's `install` (which moves the registration and retires
    the older folder: tests/test_versions.py), and nothing of the older one is touched."""
    home = tmp_path / "Users" / "ann"
    older, _ = installed(home, "0.1.0")
    before = {p: p.read_bytes() for p in older.rglob("*")}
    newer, record = installed(home, "0.1.1")
    host = newer / pkg_plan.EXECUTABLE
    host.write_text(f'#!/bin/sh\nprintf "%s|" "$0" "$@" > "{record}"\n')
    done = postinstall(tmp_path, str(newer), version="0.1.1")
    assert done.returncode == 0, done.stderr
    assert record.read_text() == f"{host}|install|--browser|all|"
    assert newer.parent == older.parent
    assert {p: p.read_bytes() for p in older.rglob("*")} == before


# --- the system package (issue 31) ----------------------------------------------------------
@pytest.fixture
def target() -> Iterator[Path]:
    """A volume's root every user can read (the test may run the script as another)."""
    folder = Path(tempfile.mkdtemp(prefix="pedelec-volume "))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def system_payload(target: Path) -> tuple[Path, Path]:
    """The payload where Installer puts it on `target`: the 'host' records its
    arguments and the state folder it was given."""
    destination = target / INSTALL_LOCATION.lstrip("/")
    destination.mkdir(parents=True)
    record = target / "ran.txt"
    host = destination / pkg_plan.EXECUTABLE
    host.write_text(f'#!/bin/sh\nprintf "%s|" "$PEDELEC_NATIVE_HOST_STATE_DIR" "$@" > "{record}"\n')
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755)
    return destination, record


def system_postinstall(
    target: Path, destination: str, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    script = target / "postinstall"
    script.write_text(pkg_plan.postinstall_script(VERSION, pkg_plan.SYSTEM))
    script.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/var/empty"}
    return subprocess.run(
        ["/bin/sh", str(script), str(target / "x.pkg"), destination, f"{target}/", "/"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60,
        check=False, user=user,
    )  # fmt: skip


def test_the_system_package_registers_for_every_user_as_root(target: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("Installer runs the system package's postinstall as root (CI is root)")
    destination, record = system_payload(target)
    done = system_postinstall(target, f"{destination}/")
    assert done.returncode == 0, done.stderr
    state = target / pkg_plan.HOME_PREFIX
    assert record.read_text() == f"{state}|install|--scope|system|--browser|all|"


def test_the_system_package_refuses_to_register_unless_run_as_root(target: Path) -> None:
    """Run as another user (or, without root to become one, as this one), it stops
    before the host runs: only root can write the browsers' system folders."""
    destination, record = system_payload(target)
    as_other = os.geteuid() == 0
    done = system_postinstall(target, str(destination), user=OTHER_UID if as_other else None)
    assert done.returncode == 1
    assert "install it as an administrator" in done.stderr
    assert not record.exists()


@pytest.mark.parametrize("where", ["home", "elsewhere"])
def test_the_system_package_refuses_a_payload_anywhere_else(target: Path, where: str) -> None:
    """A payload that Installer put anywhere but the system folder of the target (a
    home install of this package, or a relocated one) is not registered."""
    destination, record = system_payload(target)
    other = {
        "home": target / "Users" / "ann" / INSTALL_LOCATION.lstrip("/"),
        "elsewhere": target / "Applications" / "pedelec-native-host",
    }[where]
    done = system_postinstall(target, str(other))
    assert done.returncode == 1
    assert f"goes to {destination}, not {other}" in done.stderr
    assert not record.exists()
