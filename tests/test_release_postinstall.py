"""The macOS package's `postinstall` (packaging/macos/pkg_plan.py), run by a real POSIX
sh as Installer runs it: it registers the host it was installed with, from the home the
payload went into, and refuses any other install. (Installer itself, and the macOS sh,
run only on the release workflow's macOS runner.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.markers import POSIX, needs_os
from tests.support.release_scripts import release_module

pytestmark = [pytest.mark.process, needs_os(*POSIX, reason="runs the script with /bin/sh")]

pkg_plan = release_module("macos", "pkg_plan")
OTHER_UID = 4242


def installed(home: Path) -> tuple[Path, Path]:
    """A home with the payload in place: the 'host' records its arguments and HOME."""
    destination = home / pkg_plan.INSTALL_LOCATION.lstrip("/")
    destination.mkdir(parents=True)
    record = home.parent / "ran.txt"
    host = destination / pkg_plan.EXECUTABLE
    host.write_text(f'#!/bin/sh\nprintf "%s|" "$HOME" "$@" > "{record}"\n')
    host.chmod(0o755)
    return destination, record


def postinstall(
    tmp_path: Path, destination: str, target: str = "/"
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "postinstall"
    script.write_text(pkg_plan.postinstall_script())
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
    done = postinstall(tmp_path, pkg_plan.INSTALL_LOCATION + "/", f"{home}/")
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
        pkg_plan.INSTALL_LOCATION,  # the system domain: no home before it, target "/"
        pkg_plan.INSTALL_LOCATION + "/",
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
        destination = home / pkg_plan.INSTALL_LOCATION.lstrip("/")
    done = postinstall(tmp_path, str(destination))
    assert done.returncode == 1
    assert f"in {home}, which is another user's home" in done.stderr
    assert not record.exists()
