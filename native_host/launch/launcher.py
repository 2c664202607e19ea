"""Making sure a Core answers, starting Pedelec Desktop at most once at a time (spec 7.14).

Lifecycle only: this module decides *whether* to start the app and *when* its Core is
ready; the gateway decides *when* to ask (only before any byte was sent, spec 7.5) and
re-attempts its request once afterwards. Readiness is the gateway's own probe (a
verified ping), passed in, so this module never talks to the Core itself.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from native_host import errors, files, logs, paths
from native_host.launch import trust
from native_host.launch.config import launch_config_path, read_launch_config
from native_host.launch.spawn import child_environment, spawn_cwd, spawn_detached

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from native_host.config import HostConfig

log = logs.get(__name__)

_SHUTDOWN_SLICE_S = 0.05
"""How often sleeps look at `is_shutting_down` (shutdown must finish well within 2 s)."""


def _unavailable(stage: str, **details: Any) -> errors.HostError:
    return errors.HostError(
        errors.CORE_RUNTIME_UNAVAILABLE, errors.MSG_APP_NOT_RUNNING, stage, **details
    )


class _Attempt:
    """One launch attempt whose outcome every concurrent caller shares."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: errors.HostError | None = None


class Launcher:
    """Single-flight within the process (concurrent callers share one attempt and its
    outcome) and across host processes (an OS file lock; a waiter that sees the Core
    answer returns without spawning)."""

    def __init__(
        self,
        config: HostConfig,
        env: Mapping[str, str],
        probe: Callable[[float], bool],
        is_shutting_down: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config = config
        self.env = env
        self.probe = probe
        """`probe(deadline)`: True once a verified Core answers a ping."""
        self.is_shutting_down = is_shutting_down
        self._mutex = threading.Lock()
        self._current: _Attempt | None = None

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
            except errors.HostError as exc:
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
        lock = files.FileLock(self._lock_path())
        try:
            if not self._acquire(lock):
                log.info("core answered while waiting for the launch lock; no launch")
                return
            if self.probe(time.monotonic() + self.config.connect_timeout_ms / 1000):
                log.info("core already answering after taking the launch lock; no launch")
                return
            self._launch()
        finally:
            lock.release()
        log.info("core ready %d ms after the launch began", (time.monotonic() - started) * 1000)

    def _lock_path(self) -> str:
        directory = paths.state_dir(self.env)
        try:
            files.ensure_private_dir(directory)
        except files.FileRefusedError as exc:
            log.warning("launch lock directory refused: %s", exc.explanation)
        return os.path.join(directory, paths.LAUNCH_LOCK_FILE)

    def _acquire(self, lock: files.FileLock) -> bool:
        """Take the launch lock (True), or return False once a Core answers meanwhile.

        Without a usable lock file the launch goes ahead unserialised: a redundant
        `--background` launch is harmless (spec 4.1), a refused one is not.
        """
        deadline = time.monotonic() + self.config.launch_timeout_ms / 1000
        while True:
            try:
                if lock.acquire(blocking=False):
                    return True
            except OSError as exc:
                log.warning("launch lock %s unusable (%s); launching without it", lock.path, exc)
                return True
            self._sleep(self.config.launch_poll_interval_ms / 1000, errors.STAGE_LAUNCH_DESKTOP)
            if self.probe(deadline):
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
        try:
            launch = read_launch_config(launch_config_path(self.env), self.env)
        except errors.HostError as exc:
            log.info("launch config refused: %s", exc.details.get("reason"))
            raise
        if self.is_shutting_down():
            raise self._shutdown_error(errors.STAGE_SPAWN_DESKTOP_APP)
        import subprocess

        frozen = bool(getattr(sys, "frozen", False))
        try:
            program = trust.open_trusted(launch.executable_path, self.env)
        except trust.UntrustedProgramError as exc:  # changed since the config was read
            raise _unavailable(
                errors.STAGE_READ_LAUNCH_CONFIG,
                reason="invalid launch config",
                detail=launch.executable_path,
                launchConfigPath=launch.path,
                violation=exc.violation,
                error=str(exc),
            ) from None
        try:
            pid = spawn_detached(
                program,
                launch.argv,
                spawn_cwd(self.env, launch.executable_path),
                child_environment(self.env, frozen),
            )
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            log.warning("spawning the desktop app failed: %s", exc)
            raise _unavailable(
                errors.STAGE_SPAWN_DESKTOP_APP,
                launchConfigPath=launch.path,
                executablePath=launch.executable_path,
                reason=str(exc) or repr(exc),
            ) from None
        finally:
            program.close()
        log.info("launched the desktop app in the background (pid %d)", pid)
        log.debug("desktop app executable: %s", launch.executable_path)
        self._wait_ready(time.monotonic())

    def _wait_ready(self, spawned_at: float) -> None:
        """Poll with pings until one is answered or `launch_timeout_ms` has passed."""
        deadline = spawned_at + self.config.launch_timeout_ms / 1000
        stage = errors.STAGE_WAIT_FOR_CORE_RUNTIME
        while True:
            self._sleep(self.config.launch_poll_interval_ms / 1000, stage)
            if self.probe(deadline):
                return
            if time.monotonic() >= deadline:
                log.info("core not ready %d ms after the launch", self.config.launch_timeout_ms)
                raise _unavailable(
                    stage,
                    timeoutMs=self.config.launch_timeout_ms,
                    retryIntervalMs=self.config.launch_poll_interval_ms,
                )

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
    def _shutdown_error(stage: str) -> errors.HostError:
        return _unavailable(stage, reason="host is shutting down")
