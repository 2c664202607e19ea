"""Starting Pedelec Desktop in the background when its Core is down (spec 4, 7.14).

Lifecycle only: this module decides *whether* and *how* to start the app and when its
Core is ready; the relay decides *when* to ask (only before any byte was sent, 7.5)
and re-attempts its request once afterwards. Launches are rare, so pydantic and the
launch-config schema are imported only on the launch path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from native_host import errors, paths
from native_host.config import HostConfig
from native_host.core.client import CoreClient, encode_line
from native_host.core.discovery import CoreUnreachableError
from native_host.errors import HostError

if TYPE_CHECKING:
    import subprocess

log = logging.getLogger(__name__)

BACKGROUND_ARGS = ("--background",)
LAUNCH_CONFIG_VERSION = 1

# --- per-OS facts ------------------------------------------------------------
IS_WINDOWS = sys.platform == "win32"
DETACHED_PROCESS = 0x00000008
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
CREATE_BREAKAWAY_FROM_JOB = 0x01000000
WINDOWS_CREATION_FLAGS = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW
"""Always used on Windows; breakaway is added on the first try only (a job may forbid it)."""
ERROR_ACCESS_DENIED = 5
WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH
"""POSIX mode bits that make an executable unsafe to start (spec 7.14 step 5)."""
PYINSTALLER_ENV = ("_MEIPASS2",)
PYINSTALLER_ENV_PREFIXES = ("_PYI_",)
FROZEN_LIBRARY_PATHS = ("LD_LIBRARY_PATH", "LIBPATH")
"""Set by a frozen (PyInstaller) bootloader, original kept in `<name>_ORIG`: restore or drop."""
FROZEN_RESTORE_ONLY = ("DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH", "DYLD_FALLBACK_LIBRARY_PATH")
"""macOS loader paths: restored only when an `_ORIG` copy says what they were."""

_SHUTDOWN_SLICE_S = 0.05
"""How often sleeps look at `is_shutting_down` (shutdown must finish well within 2 s)."""
_MIN_PROBE_S = 0.05
"""Floor of a probe's budget so the last probe before the deadline can still succeed."""


@dataclass(frozen=True)
class LaunchConfig:
    """A validated `app-launch.json`."""

    path: Path
    executable_path: str
    background_args: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return [self.executable_path, *self.background_args]


def _unavailable(stage: str, **details: Any) -> HostError:
    return HostError(errors.CORE_RUNTIME_UNAVAILABLE, errors.MSG_APP_NOT_RUNNING, stage, **details)


def launch_config_path(env: Mapping[str, str]) -> Path:
    """Absolute path of `app-launch.json`; IPC_UNAVAILABLE when no home can be found."""
    try:
        home = paths.pedelec_home(env)
    except (RuntimeError, KeyError, OSError):
        raise HostError(
            errors.IPC_UNAVAILABLE,
            errors.MSG_LAUNCH_HOME_UNRESOLVABLE,
            errors.STAGE_READ_LAUNCH_CONFIG,
        ) from None
    return Path(os.path.abspath(home / paths.LAUNCH_CONFIG_FILE))


def read_launch_config(path: Path) -> LaunchConfig:
    """Read and validate `app-launch.json` as the Desktop does (spec 4.1), plus the
    POSIX permission check (7.14 step 5). Raises HostError with the §4.3 details."""
    stage = errors.STAGE_READ_LAUNCH_CONFIG
    where = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _unavailable(
            stage, reason="cannot read launch config", detail=str(exc), launchConfigPath=where
        ) from None
    from pydantic import ValidationError

    from native_host.models import LaunchConfigFile

    try:
        parsed = LaunchConfigFile.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        detail = f"{field}: {first['msg']}" if field else first["msg"]
        raise _unavailable(
            stage, reason="launch config is not valid JSON", detail=detail, launchConfigPath=where
        ) from None

    def invalid(violation: str) -> HostError:
        return _unavailable(
            stage,
            reason="invalid launch config",
            detail=parsed.executable_path,
            launchConfigPath=where,
            violation=violation,
        )

    if parsed.version != LAUNCH_CONFIG_VERSION:
        raise invalid("version")
    executable = Path(parsed.executable_path)
    try:
        info = executable.stat() if executable.is_absolute() else None
    except (OSError, ValueError):
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        raise invalid("executablePath")
    if tuple(parsed.background_args) != BACKGROUND_ARGS:
        raise invalid("backgroundArgs")
    if not IS_WINDOWS and info.st_mode & WRITABLE_BY_OTHERS:
        raise invalid("executablePermissions")
    return LaunchConfig(path, parsed.executable_path, tuple(parsed.background_args))


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


def _spawn_cwd(env: Mapping[str, str], executable: str) -> str:
    """The user's home (spec 7.14 step 6 says SHOULD; issue 4 suggested the executable's
    directory, which is the fallback when the home cannot be used)."""
    try:
        home = paths.user_home(env)
    except (RuntimeError, KeyError, OSError):
        home = None
    if home is not None and home.is_dir():
        return str(home)
    return str(Path(executable).parent)


def _reset_windows_dll_directory() -> None:  # pragma: no cover - Windows only
    """Undo a frozen host's `SetDllDirectoryW(_MEIPASS)` so the app loads its own DLLs."""
    if sys.platform == "win32" and getattr(sys, "frozen", False):
        import ctypes

        ctypes.windll.kernel32.SetDllDirectoryW(None)


def _popen(
    argv: Sequence[str], cwd: str, env: dict[str, str], flags: int
) -> subprocess.Popen[bytes]:
    import subprocess

    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        cwd=cwd,
        env=env,
        start_new_session=not IS_WINDOWS,
        creationflags=flags,
    )


def spawn_detached(argv: Sequence[str], cwd: str, env: dict[str, str]) -> int:
    """Start a process that outlives this host: own session (POSIX) or detached process
    group outside our job (Windows), null stdio, no inherited fds. Returns its pid.

    The child is never killed. A daemon thread reaps it so it never lingers as a zombie
    while the host lives; after the host exits, init (or the OS) does.
    """
    if IS_WINDOWS:  # pragma: no cover - Windows only
        _reset_windows_dll_directory()
        try:
            proc = _popen(argv, cwd, env, WINDOWS_CREATION_FLAGS | CREATE_BREAKAWAY_FROM_JOB)
        except OSError as exc:
            if getattr(exc, "winerror", None) != ERROR_ACCESS_DENIED:
                raise
            log.info("job forbids breakaway; launching inside it")
            proc = _popen(argv, cwd, env, WINDOWS_CREATION_FLAGS)
    else:
        proc = _popen(argv, cwd, env, 0)
    threading.Thread(
        target=_reap, args=(proc,), name=f"reap-desktop-{proc.pid}", daemon=True
    ).start()
    return proc.pid


def _reap(proc: subprocess.Popen[bytes]) -> None:
    status = proc.wait()
    log.debug("desktop app pid %d exited with status %d", proc.pid, status)


class _LaunchLock:
    """Exclusive advisory lock on `launch.lock`, shared by every host of this user.

    The fd is non-inheritable (Python's default), so a launched app never holds the
    lock; process exit releases it, even after SIGKILL.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._held = False

    def try_acquire(self) -> bool:
        """True when taken; False when another process holds it. OSError: no lock possible."""
        if self._fd is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock_fd(self._fd)
        except (BlockingIOError, PermissionError):
            return False
        self._held = True
        return True

    def close(self) -> None:
        """Release the lock (if held) and close the file."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if self._held:
            self._held = False
            _unlock_fd(fd)
        os.close(fd)


if sys.platform == "win32":  # pragma: no cover - Windows only
    import msvcrt

    def _lock_fd(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            raise BlockingIOError(str(exc)) from None

    def _unlock_fd(fd: int) -> None:
        """Windows wants a region unlocked before its handle closes."""
        os.lseek(fd, 0, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class _Attempt:
    """One launch attempt whose outcome every concurrent caller shares."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: HostError | None = None


class Launcher:
    """Makes sure a Core answers, starting Pedelec Desktop at most once at a time.

    Single-flight within the process (concurrent callers share one attempt and its
    outcome) and across host processes (an OS file lock; a waiter that sees the Core
    answer returns without spawning).
    """

    def __init__(
        self,
        config: HostConfig,
        env: Mapping[str, str],
        client: CoreClient,
        is_shutting_down: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config = config
        self.env = env
        self.client = client
        self.is_shutting_down = is_shutting_down
        self._mutex = threading.Lock()
        self._current: _Attempt | None = None

    # --- public ---------------------------------------------------------------
    def ensure_running(self) -> None:
        """Return once a Core answers a ping, launching the app if needed.

        Raises HostError with the §4.3 / 7.4 details; every concurrent caller gets
        its own copy of a shared failure.
        """
        with self._mutex:
            attempt = self._current
            leader = attempt is None
            if attempt is None:
                attempt = self._current = _Attempt()
        if leader:
            # Kept only if a BaseException escapes: the waiters must not mistake it for success.
            attempt.error = _unavailable(errors.STAGE_LAUNCH_DESKTOP, error="launch interrupted")
            try:
                self._run()
                attempt.error = None
            except HostError as exc:
                attempt.error = exc
            except Exception as exc:
                log.exception("background launch failed unexpectedly")
                attempt.error = _unavailable(errors.STAGE_LAUNCH_DESKTOP, error=str(exc))
            finally:
                with self._mutex:
                    self._current = None
                attempt.done.set()
        else:
            while not attempt.done.wait(_SHUTDOWN_SLICE_S):
                if self.is_shutting_down():
                    raise self._shutdown_error(errors.STAGE_LAUNCH_DESKTOP)
        if attempt.error is not None:
            raise attempt.error.restaged(attempt.error.stage)

    # --- one attempt ------------------------------------------------------------
    def _run(self) -> None:
        started = time.monotonic()
        lock = _LaunchLock(paths.state_dir(self.env) / paths.LAUNCH_LOCK_FILE)
        try:
            if not self._acquire(lock):
                log.info("core answered while waiting for the launch lock; no launch")
                return
            if self._probe(time.monotonic() + self.config.connect_timeout_ms / 1000):
                log.info("core already answering after taking the launch lock; no launch")
                return
            self._launch()
        finally:
            lock.close()
        log.info("core ready %d ms after the launch began", (time.monotonic() - started) * 1000)

    def _acquire(self, lock: _LaunchLock) -> bool:
        """Take the launch lock (True), or return False once a Core answers meanwhile.

        Without a usable lock file the launch goes ahead unserialised: a redundant
        `--background` launch is harmless (spec 4.1), a refused one is not.
        """
        deadline = time.monotonic() + self.config.launch_timeout_ms / 1000
        while True:
            try:
                if lock.try_acquire():
                    return True
            except OSError as exc:
                log.warning("launch lock %s unusable (%s); launching without it", lock.path, exc)
                return True
            self._sleep(self.config.launch_poll_interval_ms / 1000, errors.STAGE_LAUNCH_DESKTOP)
            if self._probe(deadline):
                return False
            if time.monotonic() >= deadline:
                log.info("launch lock not acquired within %d ms", self.config.launch_timeout_ms)
                raise _unavailable(
                    errors.STAGE_LAUNCH_DESKTOP,
                    reason="launch lock not acquired",
                    timeoutMs=self.config.launch_timeout_ms,
                )

    def _launch(self) -> None:
        """Read the launch config, spawn the app detached, wait for its Core's ping."""
        path = launch_config_path(self.env)
        try:
            launch = read_launch_config(path)
        except HostError as exc:
            log.info("launch config refused: %s", exc.details.get("reason"))
            raise
        if self.is_shutting_down():
            raise self._shutdown_error(errors.STAGE_SPAWN_DESKTOP_APP)
        import subprocess

        frozen = bool(getattr(sys, "frozen", False))
        try:
            pid = spawn_detached(
                launch.argv,
                _spawn_cwd(self.env, launch.executable_path),
                child_environment(self.env, frozen),
            )
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            log.warning("spawning the desktop app failed: %s", exc)
            raise _unavailable(
                errors.STAGE_SPAWN_DESKTOP_APP,
                launchConfigPath=str(launch.path),
                executablePath=launch.executable_path,
                reason=str(exc) or repr(exc),
            ) from None
        log.info("launched the desktop app in the background (pid %d)", pid)
        log.debug("desktop app executable: %s", launch.executable_path)
        self._wait_ready(time.monotonic())

    def _wait_ready(self, spawned_at: float) -> None:
        """Poll with pings until one is answered or `launch_timeout_ms` has passed."""
        deadline = spawned_at + self.config.launch_timeout_ms / 1000
        stage = errors.STAGE_WAIT_FOR_CORE_RUNTIME
        while True:
            self._sleep(self.config.launch_poll_interval_ms / 1000, stage)
            if self._probe(deadline):
                return
            if time.monotonic() >= deadline:
                log.info("core not ready %d ms after the launch", self.config.launch_timeout_ms)
                raise _unavailable(
                    stage,
                    timeoutMs=self.config.launch_timeout_ms,
                    retryIntervalMs=self.config.launch_poll_interval_ms,
                )

    # --- readiness ----------------------------------------------------------------
    def _probe(self, deadline: float) -> bool:
        """True when `runtime.json` is valid and fresh and its Core answers a ping ok:true.

        Each phase is bounded by the connect timeout and the time left before `deadline`.
        """

        def budget_s() -> float:
            left = max(deadline - time.monotonic(), _MIN_PROBE_S)
            return min(self.config.connect_timeout_ms / 1000, left)

        if self.is_shutting_down():
            return False
        try:
            endpoint = self.client.discover()
            sock = self.client.connect(endpoint, timeout_s=budget_s())
        except CoreUnreachableError:
            return False
        ping = {"requestId": f"host_ping_{os.urandom(6).hex()}", "type": "ping", "payload": {}}
        try:
            response = self.client.exchange(
                sock,
                encode_line(ping),
                max(1, int(budget_s() * 1000)),
                errors.STAGE_WAIT_FOR_CORE_RUNTIME,
            )
        except HostError:
            return False
        return response.get("ok") is True

    def _sleep(self, seconds: float, stage: str) -> None:
        """Sleep, but raise promptly once the host is shutting down (spec 7.13)."""
        end = time.monotonic() + seconds
        while True:
            if self.is_shutting_down():
                raise self._shutdown_error(stage)
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, _SHUTDOWN_SLICE_S))

    @staticmethod
    def _shutdown_error(stage: str) -> HostError:
        return _unavailable(stage, reason="host is shutting down")
