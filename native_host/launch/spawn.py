"""Starting Pedelec Desktop so that it outlives the host (spec 7.14 step 6).

Per-OS facts are data here: the Windows creation flags, the variables a frozen
(PyInstaller) bootloader injects and the loader paths it changes, and that macOS starts
an app bundle through LaunchServices (launch/macos.py) rather than as the host's child.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence

from native_host import logs, paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

    from native_host.launch.trust import TrustedProgram

log = logs.get(__name__)

IS_WINDOWS = sys.platform == "win32"
LAUNCH_SERVICES = sys.platform == "darwin"
"""Open a `.app`'s main executable through LaunchServices (`/usr/bin/open`), so that the
app, not the host, is responsible for it (its privacy prompts and grants)."""
DETACHED_PROCESS = 0x00000008
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
CREATE_BREAKAWAY_FROM_JOB = 0x01000000
WINDOWS_CREATION_FLAGS = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW
"""Always used on Windows; breakaway is added on the first try only (a job may forbid it)."""
ERROR_ACCESS_DENIED = 5
PYINSTALLER_ENV = ("_MEIPASS2",)
PYINSTALLER_ENV_PREFIXES = ("_PYI_",)
FROZEN_LIBRARY_PATHS = ("LD_LIBRARY_PATH", "LIBPATH")
"""Set by a frozen (PyInstaller) bootloader, original kept in `<name>_ORIG`: restore or drop."""
FROZEN_RESTORE_ONLY = ("DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH", "DYLD_FALLBACK_LIBRARY_PATH")
"""macOS loader paths: restored only when an `_ORIG` copy says what they were."""


def bundle_to_open(executable: str) -> str | None:
    """The app bundle to open through LaunchServices instead of running `executable`
    (macOS, when it is a bundle's main executable), or None: run it directly."""
    if not LAUNCH_SERVICES:
        return None
    from native_host.launch import macos

    return macos.app_bundle(executable)


def child_environment(env: Mapping[str, str], frozen: bool) -> dict[str, str]:
    """The host's environment minus what a PyInstaller bootloader injected (7.14 step 6).

    Loader paths are only touched in a frozen host: unfrozen, they are the user's own.
    """
    child = {
        key: value
        for key, value in env.items()
        if key not in PYINSTALLER_ENV and not key.startswith(PYINSTALLER_ENV_PREFIXES)
    }
    if frozen:
        for name in FROZEN_LIBRARY_PATHS + FROZEN_RESTORE_ONLY:
            original = child.pop(f"{name}_ORIG", None)
            if original is not None:
                child[name] = original
            elif name in FROZEN_LIBRARY_PATHS:
                child.pop(name, None)
    return child


def spawn_cwd(env: Mapping[str, str], executable: str) -> str:
    """The user's home (spec 7.14 step 6 says SHOULD); the executable's directory when
    the home cannot be used."""
    try:
        home = os.fspath(paths.user_home(env))
    except (RuntimeError, KeyError, OSError):
        home = ""
    if home and os.path.isdir(home):
        return home
    return os.path.dirname(executable)


def _reset_windows_dll_directory() -> None:  # pragma: no cover - Windows only
    """Undo a frozen host's `SetDllDirectoryW(_MEIPASS)` so the app loads its own DLLs."""
    if sys.platform == "win32" and getattr(sys, "frozen", False):
        import ctypes

        ctypes.windll.kernel32.SetDllDirectoryW(None)


def _popen(
    program: TrustedProgram, argv: Sequence[str], cwd: str, env: dict[str, str], flags: int
) -> subprocess.Popen[bytes]:
    import subprocess

    return subprocess.Popen(
        list(argv),
        executable=program.exec_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        cwd=cwd,
        env=env,
        start_new_session=not IS_WINDOWS,
        creationflags=flags,
    )


def spawn_detached(
    program: TrustedProgram, argv: Sequence[str], cwd: str, env: dict[str, str]
) -> int:
    """Start a checked program so that it outlives this host: own session (POSIX) or
    detached process group outside our job (Windows), null stdio, no inherited fds but
    the program's own descriptor where it is executed through it. Returns its pid.

    The child is never killed. A daemon thread reaps it so it never lingers as a zombie
    while the host lives; after the host exits, init (or the OS) does.
    """
    bundle = bundle_to_open(program.path)
    if bundle is not None:
        proc = _open_bundle(bundle, argv, cwd, env)
    elif IS_WINDOWS:  # pragma: no cover - Windows only
        _reset_windows_dll_directory()
        try:
            proc = _popen(
                program, argv, cwd, env, WINDOWS_CREATION_FLAGS | CREATE_BREAKAWAY_FROM_JOB
            )
        except OSError as exc:
            if getattr(exc, "winerror", None) != ERROR_ACCESS_DENIED:
                raise
            log.info("job forbids breakaway; launching inside it")
            proc = _popen(program, argv, cwd, env, WINDOWS_CREATION_FLAGS)
    else:
        proc = _popen(program, argv, cwd, env, 0)
    logs.hook_threads()
    threading.Thread(
        target=_reap, args=(proc,), name=f"reap-desktop-{proc.pid}", daemon=True
    ).start()
    return proc.pid


def _open_bundle(
    bundle: str, argv: Sequence[str], cwd: str, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """`open -g -j -a <bundle> --args <background args>`; `open` itself is checked like
    any program the host starts (a refusal is the OS refusing: spawn_desktop_app)."""
    from native_host.launch import macos, trust

    try:
        opener = trust.open_trusted(macos.OPEN, env)
    except trust.UntrustedProgramError as exc:
        raise OSError(f"refusing to run {macos.OPEN}: {exc}") from None
    try:
        return _popen(opener, macos.open_argv(bundle, argv[1:]), cwd, env, 0)
    finally:
        opener.close()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    status = proc.wait()
    log.debug("desktop app pid %d exited with status %d", proc.pid, status)
