"""The Windows lane: the official Windows CPython 3.13 under Wine, running the host the way
Chrome on Windows does (CONTRIBUTING.md, "The Windows lane", says how to run it).

tests/windows/setup_lane.py builds the lane under build/windows-lane/; this module knows its
layout and runs Windows programs there. Every Windows process gets pipes for stdin and
stdout (a Windows process whose stdout is a Unix file fails at start). Wine's drive Z: is
the Linux root and its C: is the prefix's drive_c, so the dev Core, runtime.json and every
test directory stay on Linux, reached through Z:, and Wine's processes share the loopback.

The lane runs in its own .ci/run step with PEDELEC_WINDOWS_LANE=1: there a missing piece
is a failure; in any other run the lane's tests skip, saying how to run them.
"""

from __future__ import annotations

import ntpath
import os
import selectors
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from native_host.hostproc import OFFICIAL_ORIGIN
from tests.support.checkout import REPO
from tests.support.host import HostUnderTest

APT_PACKAGES = ("wine", "wine64", "gcc-mingw-w64-x86-64", "wixl", "msitools", "osslsigncode")
"""Wine; MinGW-w64 for the shim, the Desktop stand-in and the bundle's executable; wixl for
the MSI; msitools' msiinfo to read the MSI's tables back; osslsigncode to verify the
embeddable CPython's Authenticode signatures."""
MINGW_GCC = "x86_64-w64-mingw32-gcc"
PROGRAMS = ("wine", "wineboot", "wineserver", MINGW_GCC, "wixl", "msiinfo", "osslsigncode")
LANE_ENV = "PEDELEC_WINDOWS_LANE"
"""Set to 1 by the lane's .ci/run step: the lane's tests run, and anything missing fails."""
RUN_IT = f"{LANE_ENV}=1 python -m pytest -m windows_lane (after tests/windows/setup_lane.py)"

DRIVER = REPO / "tests" / "windows" / "chrome_start.py"
"""The Windows Python program that starts a host exactly as Chrome on Windows does."""


class LaneMissingError(RuntimeError):
    """A piece of the Windows lane is missing or failed to set up."""


@dataclass(frozen=True)
class LaneLayout:
    """Where the lane's pieces live under the checkout's build/."""

    root: Path

    @property
    def interpreter(self) -> Path:
        return self.root / "cp313"

    @property
    def python(self) -> Path:
        return self.interpreter / "python.exe"

    @property
    def pth(self) -> Path:
        return self.interpreter / "python313._pth"

    @property
    def site_packages(self) -> Path:
        return self.interpreter / "site-packages"

    @property
    def desktop_standin(self) -> Path:
        """tests/windows/desktop_standin.c, built."""
        return self.root / "desktop-standin.exe"

    @property
    def prefix(self) -> Path:
        return self.root / "prefix"

    @property
    def drive_c(self) -> Path:
        return self.prefix / "drive_c"

    @property
    def shim(self) -> Path:
        """tests/windows/bcryptprimitives.c, built, in the prefix's system32."""
        return self.drive_c / "windows" / "system32" / "bcryptprimitives.dll"


LANE = LaneLayout(REPO / "build" / "windows-lane")


def wine_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment (without its PEDELEC_ variables) with `extra` on top,
    plus what every Wine start needs: the lane's prefix, Wine's own messages off, no
    Mono/Gecko installer dialog, and no winemenubuilder (which mirrors a Start-menu
    shortcut, the MSI's, into the Linux desktop's menus and keeps its own bookkeeping in
    HKCU\\Software\\Wine\\MenuFiles: Wine's doing, outside the prefix's Windows)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEDELEC_")}
    env.update(extra or {})
    env.update(
        WINEPREFIX=str(LANE.prefix),
        WINEDEBUG="-all",
        WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d",
    )
    env.pop("DISPLAY", None)
    return env


def windows_path(path: Path | str) -> str:
    """The Windows name of a Linux path: under drive_c it is on C:, anything else on Z:."""
    path = Path(os.path.abspath(path))
    try:
        inside = path.relative_to(LANE.drive_c)
    except ValueError:
        return "Z:" + str(path).replace("/", "\\")
    return ntpath.join("C:\\", *inside.parts)


def linux_path(path: str) -> Path:
    """The Linux file behind a Windows path on C: or Z: (case as written)."""
    drive, rest = ntpath.splitdrive(path)
    parts = [p for p in rest.split("\\") if p]
    if drive.upper() == "C:":
        return LANE.drive_c.joinpath(*parts)
    if drive.upper() == "Z:":
        return Path("/").joinpath(*parts)
    raise ValueError(f"{path} is on neither C: nor Z:")


def lane_problem() -> str | None:
    """What is missing for the lane to run, or None when it is all there."""
    missing = [name for name in ("wine", "wineserver") if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (tests/windows/setup_lane.py installs them)"
    pieces = (
        LANE.python,
        LANE.pth,
        LANE.shim,
        LANE.desktop_standin,
    )
    for piece in pieces:
        if not piece.exists():
            return f"{piece} missing: run python tests/windows/setup_lane.py"
    if not (LANE.site_packages / "native_host").is_dir():
        return "the project is not installed in the lane: run python tests/windows/setup_lane.py"
    if not (LANE.prefix / "system.reg").exists():
        return f"no Wine prefix at {LANE.prefix}: run python tests/windows/setup_lane.py"
    return None


def require_lane() -> None:
    """Skip outside the lane's own step (saying how to run it); fail inside it when a piece
    is missing, so the lane's step can never pass by skipping."""
    if os.environ.get(LANE_ENV) != "1":
        pytest.skip(f"the Windows lane runs in its own .ci/run step: {RUN_IT}")
    problem = lane_problem()
    if problem is not None:
        pytest.fail(f"Windows lane: {problem}", pytrace=False)


def python_command(python: Path | None = None) -> list[str]:
    """The command line (on Linux) that starts the lane's Windows python.exe."""
    return ["wine", str(python or LANE.python)]


def run_python(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    input: bytes = b"",
    timeout: float = 120,
    python: Path | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run the Windows python.exe with `args` until it exits, every stdio a pipe."""
    return run_to_exit([*python_command(python), *args], wine_environment(env), input, timeout, cwd)


EXITED_QUIET_S = 0.5
"""After the program exited, how long its pipes may stay silent before what was read is
all it wrote (its writes are already in the pipes: this only waits for the last reads)."""


def run_to_exit(
    command: Sequence[str],
    env: Mapping[str, str],
    input: bytes = b"",
    timeout: float = 120,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run a Windows program and take everything it wrote, waiting for its exit rather
    than for the end of its pipes: the services the first Wine program of a wineserver
    starts (services.exe and its children) inherit its handles and may hold the pipes
    open long after it exited (`msiexec` writes to files for that reason; a Windows
    Python needs pipes). TimeoutExpired only when the program itself is still running."""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=cwd,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    feeder = threading.Thread(target=_feed, args=(process.stdin, input), daemon=True)
    feeder.start()
    taken: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in taken:
            selector.register(fd, selectors.EVENT_READ)
        exited_at: float | None = None
        while selector.get_map():
            ready = selector.select(0.1)
            for key, _ in ready:
                data = os.read(key.fd, 65536)
                if data:
                    taken[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
            now = time.monotonic()
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and not ready and now - exited_at > EXITED_QUIET_S:
                break  # exited, its output read; another process holds the pipes open
            if exited_at is None and now > deadline:
                process.kill()
                process.wait()
                raise subprocess.TimeoutExpired(list(command), timeout)
    process.stdout.close()
    process.stderr.close()
    out, err = (b"".join(chunks) for chunks in taken.values())
    return subprocess.CompletedProcess(list(command), process.wait(), out, err)


def _feed(stdin: Any, data: bytes) -> None:
    """Write `data` to a program's stdin and close it (a thread: a program that reads
    nothing must not block the reader of its output)."""
    try:
        stdin.write(data)
        stdin.close()
    except OSError:  # it exited without reading
        pass


def run_code(code: str, env: Mapping[str, str] | None = None, **kwargs: Any) -> str:
    """Run Python `code` on Windows; its stdout (it must succeed)."""
    done = run_python(["-c", code], env=env, **kwargs)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode()


EVERYONE_WRITES = r"""
import ctypes
from ctypes import wintypes

def everyone_writes(path):
    advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)
    advapi32.SetNamedSecurityInfoW.argtypes = [wintypes.LPWSTR, ctypes.c_int,
        wintypes.DWORD, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    sd, size = ctypes.c_void_p(), wintypes.DWORD()
    assert advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(
        "D:(A;;FA;;;OW)(A;;FA;;;WD)", 1, ctypes.byref(sd), ctypes.byref(size))
    present, dacl, defaulted = wintypes.BOOL(), ctypes.c_void_p(), wintypes.BOOL()
    assert advapi32.GetSecurityDescriptorDacl(
        sd, ctypes.byref(present), ctypes.byref(dacl), ctypes.byref(defaulted))
    assert advapi32.SetNamedSecurityInfoW(path, 1, 0x4, None, None, dacl, None) == 0
"""
"""Windows Python code defining `everyone_writes(path)`: the file or folder's DACL set
to "owner and Everyone: full access" (SetNamedSecurityInfoW; Wine keeps Everyone's write
access, WINDOWS-UNDER-WINE.md), so another user could change it."""


def folder_everyone_writes() -> str:
    """A new folder under `C:\\` whose DACL lets Everyone write (its Windows path), as a
    folder made under `C:\\` on Windows inherits "Authenticated Users: Modify"; the
    caller removes it."""
    folder = f"C:\\pedelec-shared-{uuid.uuid4().hex[:8]}"
    run_code(f"{EVERYONE_WRITES}\nimport os\nos.mkdir({folder!r})\neveryone_writes({folder!r})")
    return folder


def run_host_cli(
    args: Sequence[str], env: Mapping[str, str] | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[bytes]:
    """`pedelec-native-host <args>` on Windows (install, doctor, uninstall, ...)."""
    return run_python(["-m", "native_host", *args], env=env, **kwargs)


def start_host_directly(
    env: Mapping[str, str], args: Sequence[str] = (OFFICIAL_ORIGIN,)
) -> HostUnderTest:
    """The host as `python.exe -m native_host <origin>`, frames over Wine's pipes."""
    return HostUnderTest(
        [*python_command(), "-m", "native_host"], args=args, env=wine_environment(env)
    )


def start_as_chrome(
    env: Mapping[str, str],
    registry_name: str | None = None,
    manifest: str | None = None,
    command: str | None = None,
    extension_id: str | None = None,
    no_stderr: bool = False,
    windows_env: Mapping[str, str] | None = None,
) -> HostUnderTest:
    """The host as Chrome on Windows starts it: the manifest found through HKCU (or given
    as a Windows path; or `command`, that command line, e.g. an .exe host started directly),
    then `cmd.exe /d /s /c ""<path>" chrome-extension://<id>/
    --parent-window=0"` with pipes for stdin and stdout, cwd the host's folder.
    `no_stderr`: no valid stderr handle, as under NativeHostsExecutablesLaunchDirectly.
    `windows_env`: set on the Windows side (Wine drops some Unix variables, HOME among them)."""
    args = [windows_path(DRIVER)]
    if registry_name is not None:
        args += ["--registry", registry_name]
    if manifest is not None:
        args += ["--manifest", manifest]
    if command is not None:
        args += ["--command", command]
    if extension_id is not None:
        args += ["--extension-id", extension_id]
    if no_stderr:
        args.append("--no-stderr")
    for name, value in (windows_env or {}).items():
        args.append(f"--env={name}={value}")
    return HostUnderTest(python_command(), args=args, env=wine_environment(env))


def stop_wine() -> None:
    """End every process left in the lane's prefix (`wineserver -k`)."""
    subprocess.run(["wineserver", "-k"], env=wine_environment(), check=False, timeout=60)
