"""Where the host under test runs: on this machine, or on Windows under Wine (the Windows
lane's installed MSI: tests/windows/as_installed_msi.py sets `PEDELEC_TEST_HOST_OS=win32`
with the `PEDELEC_TEST_HOST_CMD` that starts it as Chrome does). On this machine includes
native Windows, where the tests and the host both run (the release workflow's Windows
job): paths are as they are, and the Desktop is the stand-in `PEDELEC_TEST_DESKTOP_STANDIN`
names.

Black-box tests that name files to the host or expect its words about them (the golden
suite's `<HOME>`, a Desktop app to launch) ask this module how that host spells a path of
this machine and what program it can launch as the Desktop.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

HOST_OS_ENV = "PEDELEC_TEST_HOST_OS"
WINDOWS = "win32"
PROGRAM_FILES_PREFIX = "Pedelec test desktop "
DESKTOP_STANDIN_ENV = "PEDELEC_TEST_DESKTOP_STANDIN"
"""Native Windows: tests/windows/desktop_standin.c built (`gcc -municode`), by path."""


def host_is_windows() -> bool:
    return os.environ.get(HOST_OS_ENV) == WINDOWS


def host_path(path: Path) -> str:
    """`path` as the host under test names it (on Windows under Wine: through Z:)."""
    if host_is_windows():
        from tests.support.wine import windows_path

        return windows_path(path)
    return str(path)


def host_separator() -> str:
    return "\\" if host_is_windows() else os.sep


def write_desktop_app(root: Path, home: Path, core_args: list[str] | None) -> tuple[Path, Path]:
    """A stand-in for Pedelec Desktop in `root`, registered in `home`'s app-launch.json:
    it leaves a marker file and, given `core_args` (`dev-core` options), execs a dev Core.
    On Windows it is tests/windows/desktop_standin.c's .exe, starting the lane's Windows
    Python (under Wine) or this Python (natively). Returns the app and the marker."""
    if host_is_windows():
        app, marker = _windows_app(root, core_args)
    elif sys.platform == "win32":
        app, marker = _native_windows_app(root, core_args)
    else:
        app, marker = _posix_app(root, core_args)
    config = {"version": 1, "executablePath": host_path(app), "backgroundArgs": ["--background"]}
    (home / "app-launch.json").write_text(json.dumps(config))
    return app, marker


def _posix_app(root: Path, core_args: list[str] | None) -> tuple[Path, Path]:
    app, marker = root / "fake-desktop", root / "launched.marker"
    lines = [f"#!{sys.executable}", "import os, subprocess, sys"]
    lines.append(f"open({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')")
    if core_args is not None:
        command = [sys.executable, "-m", "native_host", "dev-core", *core_args]
        lines.append(f"os.execv(sys.executable, {command!r})")
    app.write_text("\n".join(lines) + "\n")
    app.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return app, marker


def _windows_app(root: Path, core_args: list[str] | None) -> tuple[Path, Path]:
    """Under C:\\Program Files, where the Desktop's installer puts it: the host launches
    nothing from a folder others could write (Z:\\tmp is one, to Windows)."""
    import shutil
    import uuid

    from tests.support.wine import LANE, windows_path

    folder = LANE.drive_c / "Program Files" / f"{PROGRAM_FILES_PREFIX}{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    app = folder / "Pedelec.exe"
    shutil.copy(LANE.desktop_standin, app)
    command = ""
    if core_args is not None:
        named = [windows_path(Path(a)) if a.startswith("/") else a for a in core_args]
        command = subprocess.list2cmdline(
            [windows_path(LANE.python), "-m", "native_host", "dev-core", *named]
        )
    (folder / "Pedelec.cmdline").write_text(command, encoding="utf-8")
    return app, folder / "Pedelec.started"


def _native_windows_app(root: Path, core_args: list[str] | None) -> tuple[Path, Path]:
    """The stand-in `DESKTOP_STANDIN_ENV` names, in a folder of its own beside its
    command line: this interpreter's dev Core, every path as it is."""
    import shutil

    standin = os.environ.get(DESKTOP_STANDIN_ENV, "")
    if not os.path.isfile(standin):
        raise RuntimeError(
            f"{DESKTOP_STANDIN_ENV}={standin!r}: set it to tests/windows/desktop_standin.c "
            "built with `gcc -municode` (the release workflow's Windows job does)"
        )
    folder = root / "fake-desktop"
    folder.mkdir(exist_ok=True)
    app = folder / "Pedelec.exe"
    shutil.copy(standin, app)
    command = ""
    if core_args is not None:
        command = subprocess.list2cmdline(
            [sys.executable, "-m", "native_host", "dev-core", *core_args]
        )
    (folder / "Pedelec.cmdline").write_text(command, encoding="utf-8")
    return app, folder / "Pedelec.started"


def remove_desktop_app(app: Path) -> None:
    """Remove a stand-in `write_desktop_app` put outside the test's own folder."""
    if app.parent.name.startswith(PROGRAM_FILES_PREFIX):
        import shutil

        shutil.rmtree(app.parent, ignore_errors=True)


def stop_process(pid: int) -> None:
    """End a process the host launched (the Desktop's dev Core), by its pid on the host's
    system (natively on Windows too: there `os.kill` terminates the process)."""
    if host_is_windows():
        from tests.support.wine import wine_environment

        subprocess.run(
            ["wine", "taskkill", "/F", "/PID", str(pid)],
            capture_output=True, stdin=subprocess.PIPE, env=wine_environment(),
            timeout=60, check=False,
        )  # fmt: skip
        return
    with contextlib.suppress(OSError):
        os.kill(pid, 15)
