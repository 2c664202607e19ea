"""`install` finds a browser by its program as well as by its profile (issue 32): one
installed but never started is registered, and says what to do next; a program that
another local user could have planted does not count.

Each test builds a machine of its own: the browsers' system folders under a root the
test makes (`/opt`, `/usr/lib`, `/Applications`, Program Files), with a real program
file planted at a path of the locations table (`locations.PROGRAMS`), and `install`
run as a user runs it (tests/support/machine.py); the attacks use a real throwaway user.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest

from native_host import HOST_NAME
from native_host.install import locations, programs
from native_host.install.plan import Environment, installed_rows
from tests.support.machine import install_cli
from tests.support.markers import needs_os
from tests.support.users import LocalUser, skip_unless_root, throwaway_users

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="plants programs owned by throwaway local users"),
]

CHROMIUM = "usr/lib/chromium/chromium"
CHROME = "opt/google/chrome/chrome"


@pytest.fixture
def machine() -> Iterator[Path]:
    """A root for the system folders, where other users can reach (pytest's temporary
    folders are private to root): root's own, 0755, as `/` is."""
    root = Path(tempfile.mkdtemp(prefix="pedelec-machine-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def plant(machine: Path, relative: str, mode: int = 0o755) -> Path:
    """A program at `relative` under the machine, its folders 0755, as a package puts it."""
    program = machine / relative
    folder = machine
    for part in PurePosixPath(relative).parent.parts:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
    shutil.copy("/bin/true", program)
    program.chmod(mode)
    return program


def manifest(home: Path, user_data: str) -> Path:
    return home / ".config" / user_data / "NativeMessagingHosts" / f"{HOST_NAME}.json"


def test_a_browser_installed_but_never_started_is_registered(
    env: dict[str, str], machine: Path
) -> None:
    program = plant(machine, CHROMIUM)
    home = Path(env["HOME"])
    assert not (home / ".config" / "chromium").exists()  # never started
    done = install_cli(env, machine, "install", "--force")
    assert done.returncode == 0, done.stderr
    assert manifest(home, "chromium").is_file()
    assert (
        f"note            Chromium: installed ({program}) but never started: registered all "
        "the same; start it once, then add the Pedelec extension"
    ) in done.stdout.splitlines()
    assert done.stdout.splitlines()[-1].startswith("next: check that each browser can start")
    again = install_cli(env, machine, "install", "--force")  # started or not: the same place
    assert again.returncode == 0 and "unchanged       manifest" in again.stdout


def test_a_started_browser_needs_no_program(env: dict[str, str], machine: Path) -> None:
    home = Path(env["HOME"])
    (home / ".config" / "chromium").mkdir(parents=True)
    done = install_cli(env, machine, "install", "--force")
    assert done.returncode == 0, done.stderr
    assert "never started" not in done.stdout
    assert manifest(home, "chromium").is_file()


def test_without_profile_or_program_nothing_is_found(env: dict[str, str], machine: Path) -> None:
    done = install_cli(env, machine, "install", "--force")
    assert done.returncode == 1
    assert done.stderr.startswith("error: no installed browser found")


@pytest.mark.parametrize(
    ("platform", "home", "env", "planted", "name"),
    [
        ("linux", "/home/ann", {}, "/opt/microsoft/msedge/msedge", "edge"),
        ("linux", "/home/ann", {}, "/home/ann/.local/share/flatpak/exports/bin/"
         "com.brave.Browser", "brave-flatpak"),
        ("darwin", "/Users/ann", {},
         "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome", "chrome"),
        ("darwin", "/Users/ann", {},
         "/Users/ann/Applications/Arc.app/Contents/MacOS/Arc", "arc"),
        ("win32", r"C:\Users\ann", {"ProgramFiles(x86)": "{machine}/Program Files (x86)"},
         "{machine}/Program Files (x86)/Microsoft/Edge/Application/msedge.exe", "edge"),
        ("win32", r"C:\Users\ann", {"LOCALAPPDATA": "{machine}/Local"},
         "{machine}/Local/Google/Chrome SxS/Application/chrome.exe", "chrome-canary"),
    ],
)  # fmt: skip
def test_each_systems_programs_are_found_where_the_table_says(
    machine: Path, platform: str, home: str, env: dict[str, str], planted: str, name: str
) -> None:
    """The table's paths for each system, found as that system would name them (the
    home and Windows' folders pointed into the machine)."""
    variables = {k: v.format(machine=machine) for k, v in env.items()}
    where = planted.format(machine=machine)
    home_root = machine / "home-root"
    if where.startswith(home):  # the home's own folders live in the machine too
        variables["HOME"] = str(home_root)
        where = str(home_root) + where[len(home) :]
        home = str(home_root)
    relative = where.removeprefix(str(machine)).lstrip("/")
    plant(machine, relative)
    flavour = PureWindowsPath if platform == "win32" else PurePosixPath
    ctx = Environment(platform, variables, flavour(home), sys.executable, False,
                      system_root=machine)  # fmt: skip
    presence = installed_rows(locations.rows_for(platform), ctx)
    assert [row.name for row in presence.rows] == [name]
    assert presence.never_started[name] == machine / relative
    assert presence.refused == []


def test_every_browser_of_the_table_says_where_its_program_is() -> None:
    """Each row has its programs, but the two that have no fixed place: Chrome for
    Testing on Linux (unpacked anywhere) and Arc on Windows (an MSIX package, its folder
    named by its version)."""
    without = {(row.os.value, row.name) for row in locations.TABLE if not row_programs(row)}
    assert without == {("linux", "chrome-for-testing"), ("win32", "arc")}


def row_programs(row: locations.BrowserRow) -> tuple[locations.Program, ...]:
    home = PureWindowsPath(r"C:\Users\ann") if row.os.value == "win32" else PurePosixPath("/h")
    return locations.row_programs(row, {}, home)


# --- another user planted the program, or the folder ------------------------------------
@pytest.fixture
def mallory() -> Iterator[LocalUser]:
    skip_unless_root()
    with throwaway_users() as make_user:
        yield make_user()


def assert_not_counted(
    env: dict[str, str], machine: Path, culprit: Path, why: str, user_data: str
) -> None:
    """Not installed: nothing registered, and `--verbose` names what was refused (the
    program, or the folder on the way to it) and why."""
    done = install_cli(env, machine, "install", "--force", "--verbose")
    assert done.returncode == 1, done.stdout
    assert not (Path(env["HOME"]) / ".config" / user_data).exists()
    assert "error: no installed browser found" in done.stderr
    refused = [line for line in done.stderr.splitlines() if line.startswith("  refused ")]
    assert len(refused) == 1, done.stderr
    assert refused[0].startswith("  refused chrome: ") and why in refused[0], refused[0]
    assert refused[0].endswith(": not counted as installed")
    assert refused[0].startswith(f"  refused chrome: {culprit} ("), refused[0]


def test_a_program_another_user_put_in_a_folder_open_to_all_does_not_count(
    env: dict[str, str], machine: Path, mallory: LocalUser
) -> None:
    """`/opt` open to every user (sticky, as /tmp): Mallory makes `opt/google/chrome`
    and puts a "chrome" in it."""
    opt = machine / "opt"
    opt.mkdir()
    opt.chmod(0o1777)
    mallory.run(["mkdir", "-p", str(machine / "opt/google/chrome")])
    mallory.run(["cp", "/bin/true", str(machine / CHROME)])
    assert (machine / CHROME).stat().st_uid == mallory.uid
    google = machine / "opt" / "google"  # the first step that is not root's or the user's
    assert_not_counted(env, machine, google, "belongs to another user", "google-chrome")


def test_a_program_in_a_folder_others_can_write_does_not_count(
    env: dict[str, str], machine: Path
) -> None:
    program = plant(machine, CHROME)
    program.parent.chmod(0o777)  # anyone could have swapped it
    assert_not_counted(env, machine, program.parent, "writable by other users", "google-chrome")


def test_a_program_file_of_another_user_does_not_count(
    env: dict[str, str], machine: Path, mallory: LocalUser
) -> None:
    program = plant(machine, CHROME)
    os.chown(program, mallory.uid, mallory.gid)
    assert_not_counted(env, machine, program, "belongs to another user", "google-chrome")


def test_a_refused_program_leaves_the_other_browsers_alone(
    env: dict[str, str], machine: Path
) -> None:
    """A planted Chrome beside a genuine Chromium: Chromium is registered, Chrome is
    not, and a warning says why."""
    plant(machine, CHROMIUM)
    program = plant(machine, CHROME)
    program.chmod(program.stat().st_mode | stat.S_IWOTH)
    done = install_cli(env, machine, "install", "--force")
    assert done.returncode == 0, done.stderr
    home = Path(env["HOME"])
    assert manifest(home, "chromium").is_file()
    assert not (home / ".config" / "google-chrome").exists()
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning")]
    assert [w for w in warnings if "chrome: " in w] == [
        f"warning         chrome: {program} (the executable) is writable by other users: "
        "not counted as installed"
    ]


def test_doctor_checks_a_browser_found_by_its_program(env: dict[str, str], machine: Path) -> None:
    """doctor looks where install looks: a never-started browser is checked too."""
    from native_host.install.doctor import Doctor

    plant(machine, CHROMIUM)
    doctor = Doctor("linux", env, PurePosixPath(env["HOME"]), system_root=machine)
    assert [row.name for row in doctor.installed_rows()] == ["chromium"]
    assert (
        programs.find_program(
            locations.select_rows("linux", ["chromium"])[0],
            env,
            PurePosixPath(env["HOME"]),
            machine,
        ).program
        == machine / CHROMIUM
    )
