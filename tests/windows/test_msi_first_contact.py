"""On the Windows lane: after installing the MSI, the user learns it worked and how to
check it (issue 32). The package holds a Start-menu entry opening a command prompt in
the install folder that runs the host's `doctor`; a double-clicked install (full UI) opens
that window when it is done, a silent or basic one does not; removing the package removes
the entry.

What Wine can show: the tables, the shortcut file Windows Installer writes and removes,
the window's very command run by Windows' cmd.exe (its output through pipes), and which
installs run the action (Windows Installer's own log). What it cannot: a console window
on a screen (the lane has none), so the window's output is read through pipes instead.

The tests that install and remove the package themselves come first; the last one uses
test_msi.py's module fixture (`installed_msi`), which stays installed to the module's end.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from native_host import __version__
from tests.support.msi import (
    EXECUTABLE,
    built_msi,
    install_dir,
    products,
    uninstall,
    version_dir,
)
from tests.support.packaging_scripts import windows_module
from tests.support.wine import (
    LANE,
    linux_path,
    run_code,
    run_python,
    stop_wine,
    windows_path,
    wine_environment,
)
from tests.windows.conftest import InstalledMsi

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

msi_document = windows_module("msi_document")
START_MENU = r"\Microsoft\Windows\Start Menu\Programs"


def msi_table(name: str) -> list[list[str]]:
    done = subprocess.run(
        ["msiinfo", "export", str(built_msi()), name], capture_output=True, text=True, check=True
    )
    return [line.split("\t") for line in done.stdout.splitlines()[3:]]


def shortcut_file() -> Path:
    appdata = run_code("import os; print(os.environ['APPDATA'])").strip()
    return linux_path(appdata + START_MENU) / f"{msi_document.START_MENU_ENTRY}.lnk"


def test_the_package_holds_the_entry_and_the_window_of_a_double_click(lane: None) -> None:
    (shortcut,) = msi_table("Shortcut")
    _id, folder, name, _component, target, arguments, *_rest = shortcut
    assert (folder, name, target) == (
        "ProgramMenuFolder", msi_document.START_MENU_ENTRY, "[System64Folder]cmd.exe"
    )  # fmt: skip
    assert arguments == msi_document.check_command(f"{__version__}/{EXECUTABLE}")
    # WkDir: the version's folder (issue 30), where the executable is.
    (version,) = [row for row in msi_table("Directory") if row[2] == __version__]
    assert (shortcut[11], version[1]) == (version[0], "INSTALLDIR")
    actions = {row[0]: row for row in msi_table("CustomAction")}
    kind = int(actions["OpenCheckWindow"][1])
    # An EXE named by a property (50), asynchronous without waiting (0x80 | 0x40),
    # immediate: not in the script (0x400).
    assert (kind & 0x3F, kind & 0xC0, kind & 0x400) == (50, 0xC0, 0)
    sequence = {row[0]: row for row in msi_table("InstallExecuteSequence")}
    assert sequence["OpenCheckWindow"][1] == "UILevel = 5 AND NOT Installed AND NOT REMOVE"
    assert int(sequence["InstallFinalize"][2]) < int(sequence["OpenCheckWindow"][2])


def msiexec_logged(*args: str) -> str:
    """`msiexec ARGS /l*v <log>` to the end; the log Windows Installer wrote."""
    log = LANE.drive_c / "first-contact.log"
    log.unlink(missing_ok=True)
    with tempfile.TemporaryFile() as out:
        done = subprocess.run(
            ["wine", "msiexec", *args, "/l*v", windows_path(log)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=wine_environment(),
            timeout=300, check=False,
        )  # fmt: skip
    assert done.returncode == 0, args
    raw = log.read_bytes()
    return raw.decode("utf-16") if raw[:2] == b"\xff\xfe" else raw.decode(errors="replace")


def ran(log: str, action: str) -> bool:
    """Whether the log shows `action` run to its end (Windows Installer: "Action ended
    <time>: <action>. Return value 1.")."""
    return any(
        line.startswith("Action ended") and f" {action}. Return value 1" in line
        for line in log.splitlines()
    )


@pytest.mark.parametrize(("ui", "level", "opens"), [("/qn", "2", False), ("/qb", "3", False),
                                                    (None, "5", True)])  # fmt: skip
def test_only_a_double_clicked_install_opens_the_window(
    lane: None, ui: str | None, level: str, opens: bool
) -> None:
    """A double click is `msiexec /i` without /q: the full UI (5). The window itself needs
    a screen (the lane has none): here it starts and ends at once, its report unseen."""
    msi = built_msi()
    assert products() == [], "the lane's prefix already holds a Pedelec MSI"
    try:
        log = msiexec_logged("/i", windows_path(msi), *([ui] if ui else []))
        assert f"UILevel = {level}" in log
        assert ran(log, "OpenCheckWindow") is opens
        assert shortcut_file().is_file()
    finally:
        stop_wine()
        assert uninstall(msi).returncode == 0
        stop_wine()
    assert products() == []
    assert not shortcut_file().exists()
    profile = run_code("import os; print(os.environ['USERPROFILE'])").strip()
    assert not linux_path(install_dir(profile)).exists()


def test_the_start_menu_entry_runs_the_check_and_leaves_a_prompt_in_the_folder(
    installed_msi: InstalledMsi,
) -> None:
    """The shortcut's own command, run by Windows' cmd.exe from the version's folder (its
    working directory): doctor's report, ending with the verdict, then the prompt there
    (it ends when its input does)."""
    assert shortcut_file().is_file()
    arguments = msi_document.check_command(f"{__version__}/{EXECUTABLE}").replace(
        "[INSTALLDIR]", installed_msi.folder + "\\"
    )
    folder = version_dir(installed_msi.folder)
    code = (
        "import subprocess, sys\n"
        f"done = subprocess.run(r'C:\\windows\\system32\\cmd.exe ' + {arguments!r},\n"
        f"    cwd={folder!r}, stdin=subprocess.DEVNULL, capture_output=True,\n"
        "    timeout=300)\n"
        "sys.stdout.write(done.stdout.decode('utf-8', 'replace'))\n"
    )
    done = run_python(["-c", code], timeout=400)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    output = done.stdout.decode(errors="replace").splitlines()
    verdicts = [line for line in output if line.startswith("verdict: ")]
    assert len(verdicts) == 1, output
    assert "Pedelec Desktop is not running" in verdicts[0]  # no Desktop in the lane's prefix
    assert output[-1].strip().rstrip(">").lower() == folder.lower()  # the prompt
