"""Background launch of Pedelec Desktop (spec 4, 7.14; issue 4), with real processes.

Each test writes a fake Desktop executable (tests/launch_support/fake_desktop.py behind a
`#!/usr/bin/env python3` line) that records how it was started, waits, then serves a
Core on the test's own Pedelec home. `Launcher.ensure_running()` runs in-process, or in
helper processes (tests/launch_support/run_launcher.py) for the cross-process cases.
Every process a test starts is killed at its end through the recorded pids.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host import errors
from native_host.config import HostConfig, load_config
from native_host.errors import HostError
from native_host.gateway import CoreGateway
from native_host.hostproc import HostProcess, default_host_command
from native_host.launch.launcher import Launcher
from native_host.launch.spawn import child_environment
from tests.support.markers import needs_os
from tests.support.runtime import free_port, write_runtime

pytestmark = [
    pytest.mark.process,
    needs_os(
        "linux", reason="the fake Desktop is a #! script; processes are watched through /proc"
    ),
]

REPO = Path(__file__).resolve().parent.parent
SUPPORT = Path(__file__).resolve().parent / "launch_support"
FAKE_DESKTOP = (SUPPORT / "fake_desktop.py").read_text(encoding="utf-8")
RUN_LAUNCHER = SUPPORT / "run_launcher.py"
SHORT_TIMEOUT_MS = 1500
"""Launch timeout of the tests that expect a timeout; the others allow plenty."""
UNAVAILABLE = (errors.CORE_RUNTIME_UNAVAILABLE, errors.MSG_APP_NOT_RUNNING)
USE_DEV_CORE = (
    importlib.util.find_spec("native_host.devcore.cli") is not None
    and os.environ.get("PEDELEC_TEST_INLINE_CORE") != "1"
)
"""The fake Desktop's Core is the project's dev Core (legacy generation) when it exists;
PEDELEC_TEST_INLINE_CORE=1 selects the tiny inline ping server instead."""


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def process_running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] != "Z"


class LaunchWorld:
    """One test's isolated directories, fake Desktop executables and started processes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.user_home = root / "user"
        self.home = root / "pedelec-home"
        self.state_dir = root / "state"
        self.launches_file = root / "launches.jsonl"
        self.user_home.mkdir()
        self.home.mkdir()
        base = {k: v for k, v in os.environ.items() if not k.startswith("PEDELEC_")}
        python_dir = str(Path(sys.executable).parent)
        self.env: dict[str, str] = {
            **base,
            # `#!/usr/bin/env python3` must find this interpreter, not a shim that
            # depends on HOME.
            "PATH": os.pathsep.join([python_dir, base.get("PATH", os.defpath)]),
            "HOME": str(self.user_home),
            "PEDELEC_HOME": str(self.home),
            "PEDELEC_NATIVE_HOST_STATE_DIR": str(self.state_dir),
            "PEDELEC_NATIVE_HOST_CONFIG_DIR": str(root / "config"),
            "PEDELEC_NATIVE_HOST_LOG_DIR": str(root / "logs"),
            "PYTHONPATH": str(REPO),
        }
        self.procs: list[subprocess.Popen[Any]] = []
        self.gateways: list[CoreGateway] = []
        # Success paths return as soon as a Core answers: a long timeout costs nothing and
        # absorbs a starved dev Core start on a loaded machine.
        self.config = HostConfig(launch_timeout_ms=30_000, connect_timeout_ms=1000)

    # --- fake Desktop ---------------------------------------------------------------
    def write_app(
        self,
        mode: str = "core",
        delay_s: float = 0.2,
        name: str = "pedelec-app",
        mode_bits: int = 0o755,
    ) -> Path:
        """A fake Desktop executable; `mode` is core | silent | failing | never."""
        config = {
            "mode": mode,
            "delay_s": delay_s,
            "home": str(self.home),
            "launches": str(self.launches_file),
            "lifetime_s": 90,
            "python": sys.executable,
            "dev_core": USE_DEV_CORE,
        }
        path = self.root / "app" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"#!/usr/bin/env python3\n{FAKE_DESKTOP}\nmain({config!r})\n")
        path.chmod(mode_bits)
        return path

    def write_launch_config(
        self,
        executable: Path | str,
        version: Any = 1,
        background_args: Any = ("--background",),
    ) -> Path:
        document = {
            "version": version,
            "executablePath": str(executable),
            "backgroundArgs": list(background_args),
        }
        return self.write_launch_config_text(json.dumps(document, indent=2))

    def write_launch_config_text(self, text: str) -> Path:
        path = self.home / "app-launch.json"
        path.write_text(text)
        return path

    def start_app_directly(self, app: Path) -> subprocess.Popen[bytes]:
        """Run a fake Desktop ourselves, as if the user had started it."""
        proc = subprocess.Popen(
            [str(app)],
            env={**self.env, "FAKE_DESKTOP_MARKER": "manual"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc

    # --- the code under test ----------------------------------------------------------
    def gateway(self, config: HostConfig | None = None) -> CoreGateway:
        gateway = CoreGateway(config or self.config, self.env)
        self.gateways.append(gateway)
        return gateway

    def launcher(
        self,
        config: HostConfig | None = None,
        is_shutting_down: Callable[[], bool] = lambda: False,
    ) -> Launcher:
        """The launcher as the host builds it: readiness is the gateway's verified ping."""
        config = config or self.config
        return Launcher(config, self.env, self.gateway(config).probe, is_shutting_down)

    def run_launcher_process(self, go_file: Path, **env: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(RUN_LAUNCHER), str(go_file)],
            env={**self.env, **env},
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["waiting"] == proc.pid
        return proc

    # --- observations -------------------------------------------------------------------
    def launches(self, include_manual: bool = False) -> list[dict[str, Any]]:
        try:
            lines = self.launches_file.read_text().splitlines()
        except FileNotFoundError:
            return []
        entries = [json.loads(line) for line in lines if line.strip()]
        return [e for e in entries if include_manual or e["marker"] != "manual"]

    def ping(self) -> bool:
        """Does a Core answer a ping through `runtime.json` right now?"""
        try:
            self.gateway().ping(2.0)
        except Exception:
            return False
        return True

    def lock_is_free(self) -> bool:
        import fcntl

        fd = os.open(self.state_dir / "launch.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True

    def close(self) -> None:
        for gateway in self.gateways:
            gateway.close_all()
        pids = [e["pid"] for e in self.launches(include_manual=True)]
        pids += [p.pid for p in self.procs]
        for pid in pids:
            if self._is_ours(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)

    def _is_ours(self, pid: int) -> bool:
        """Guard against pid reuse: only kill a process started from this test's files."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return str(self.root).encode() in cmdline or str(RUN_LAUNCHER).encode() in cmdline


@pytest.fixture
def world(tmp_path: Path) -> Iterator[LaunchWorld]:
    w = LaunchWorld(tmp_path)
    try:
        yield w
    finally:
        w.close()


def ensure(launcher: Launcher) -> None:
    """`ensure_running()`, failing the test with the error's details if it raises."""
    try:
        launcher.ensure_running()
    except HostError as exc:
        pytest.fail(f"ensure_running raised {exc.code} {exc.details}")


def launch_error(launcher: Launcher) -> HostError:
    with pytest.raises(HostError) as caught:
        launcher.ensure_running()
    return caught.value


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# --- launch config ---------------------------------------------------------------------


def test_no_launch_config_reports_read_launch_config(world: LaunchWorld) -> None:
    err = launch_error(world.launcher())
    assert (err.code, err.message) == UNAVAILABLE
    detail = err.details.pop("detail")
    assert isinstance(detail, str) and detail
    assert err.details == {
        "stage": "read_launch_config",
        "reason": "cannot read launch config",
        "launchConfigPath": str(world.home / "app-launch.json"),
    }
    assert world.launches() == []


INVALID_CONFIGS: list[tuple[str, Callable[[LaunchWorld, Path], Path], str, str | None]] = [
    ("bad json", lambda w, app: w.write_launch_config_text("{not json"), "json", None),
    (
        "missing field",
        lambda w, app: w.write_launch_config_text(
            json.dumps({"version": 1, "executablePath": str(app)})
        ),
        "json",
        None,
    ),
    ("version as string", lambda w, app: w.write_launch_config(app, version="1"), "json", None),
    ("not an object", lambda w, app: w.write_launch_config_text("[]"), "json", None),
    ("version 2", lambda w, app: w.write_launch_config(app, version=2), "invalid", "version"),
    (
        "relative path",
        lambda w, app: w.write_launch_config("app/pedelec-app"),
        "invalid",
        "executablePath",
    ),
    (
        "missing file",
        lambda w, app: w.write_launch_config(app.with_name("gone")),
        "invalid",
        "executablePath",
    ),
    ("directory", lambda w, app: w.write_launch_config(app.parent), "invalid", "executablePath"),
    (
        "no background args",
        lambda w, app: w.write_launch_config(app, background_args=[]),
        "invalid",
        "backgroundArgs",
    ),
    (
        "other background args",
        lambda w, app: w.write_launch_config(app, background_args=["--x"]),
        "invalid",
        "backgroundArgs",
    ),
    (
        "extra background args",
        lambda w, app: w.write_launch_config(app, background_args=["--background", "--x"]),
        "invalid",
        "backgroundArgs",
    ),
]


@pytest.mark.parametrize(
    ("write", "kind", "violation"),
    [case[1:] for case in INVALID_CONFIGS],
    ids=[case[0] for case in INVALID_CONFIGS],
)
def test_invalid_launch_config_is_refused(
    world: LaunchWorld,
    write: Callable[[LaunchWorld, Path], Path],
    kind: str,
    violation: str | None,
) -> None:
    app = world.write_app()
    config_path = write(world, app)
    err = launch_error(world.launcher())
    assert (err.code, err.message) == UNAVAILABLE
    assert err.details["stage"] == "read_launch_config"
    assert err.details["launchConfigPath"] == str(config_path)
    if kind == "json":
        assert err.details["reason"] == "launch config is not valid JSON"
        assert isinstance(err.details["detail"], str) and err.details["detail"]
        assert "violation" not in err.details
    else:
        written = json.loads(config_path.read_text())["executablePath"]
        assert err.details == {
            "stage": "read_launch_config",
            "reason": "invalid launch config",
            "detail": written,
            "launchConfigPath": str(config_path),
            "violation": violation,
        }
    assert world.launches() == []


def foreign_group() -> int:
    """A group that is not the user's private one (chgrp to it needs root, as in CI)."""
    return next(g for g in (50, 65534, 100) if g != os.getegid())


@pytest.mark.parametrize(
    ("bits", "via_symlink", "chgrp"),
    [
        (0o775, False, True),
        (0o757, False, False),
        (0o777, False, False),
        (0o775, True, True),
    ],
    ids=["group-writable", "other-writable", "world-writable", "symlink-to-group-writable"],
)
def test_writable_executable_is_refused(
    world: LaunchWorld, bits: int, via_symlink: bool, chgrp: bool
) -> None:
    app = world.write_app()
    app.chmod(bits)
    if chgrp:
        os.chown(app, -1, foreign_group())
    named = app
    if via_symlink:
        named = world.root / "app-link"
        named.symlink_to(app)
    config_path = world.write_launch_config(named)
    err = launch_error(world.launcher())
    assert err.details.pop("error") == f"{app} (the executable) is writable by other users"
    assert err.details == {
        "stage": "read_launch_config",
        "reason": "invalid launch config",
        "detail": str(named),
        "launchConfigPath": str(config_path),
        "violation": "executablePermissions",
    }
    assert world.launches() == []


def test_group_write_by_the_users_private_group_is_harmless(world: LaunchWorld) -> None:
    """Debian and Ubuntu give each user a private group and umask 002: an app saved
    there is 0775 and must still start (the exception Debian's OpenSSH makes too)."""
    app = world.write_app()
    app.chmod(0o775)
    os.chown(app, -1, os.getegid())
    world.write_launch_config(app)
    ensure(world.launcher())
    assert len(world.launches()) == 1


def test_an_executable_in_a_directory_others_can_write_is_refused(world: LaunchWorld) -> None:
    app = world.write_app()
    app.parent.chmod(0o777)  # not sticky: anybody may replace the app inside it
    world.write_launch_config(app)
    err = launch_error(world.launcher())
    assert err.details["violation"] == "executableDirectory"
    assert (
        err.details["error"] == f"{app.parent} (a directory on the way) is writable by other users"
    )
    assert world.launches() == []


def test_a_script_whose_interpreter_others_can_write_is_refused(world: LaunchWorld) -> None:
    interpreter = world.root / "python-copy"
    interpreter.symlink_to(sys.executable)
    tool = world.root / "tools"
    tool.mkdir()
    shared = tool / "python"
    shutil.copy(sys.executable, shared)
    shared.chmod(0o777)
    app = world.write_app()
    app.write_text(app.read_text().replace("#!/usr/bin/env python3", f"#!{shared}", 1))
    world.write_launch_config(app)
    err = launch_error(world.launcher())
    assert err.details["violation"] == "interpreter"
    assert "the script's interpreter" in err.details["error"]
    assert world.launches() == []


def test_what_runs_is_the_file_that_was_checked(world: LaunchWorld, tmp_path: Path) -> None:
    """The checked file is executed through its descriptor: replacing the path after the
    check (a rename by whoever can write there) does not change what starts."""
    from native_host.launch import trust
    from native_host.launch.spawn import spawn_detached

    checked_ran = tmp_path / "checked-ran"
    payload_ran = tmp_path / "payload-ran"
    program_path = tmp_path / "bin" / "app"
    program_path.parent.mkdir()
    shutil.copy("/usr/bin/touch", program_path)  # a binary: executed through its descriptor
    program = trust.open_trusted(str(program_path), world.env)
    payload = tmp_path / "bin" / "payload"
    payload.write_text(f"#!/bin/sh\ntouch {payload_ran}\n")
    payload.chmod(0o755)
    os.replace(payload, program_path)
    argv = [str(program_path), str(checked_ran)]
    try:
        pid = spawn_detached(program, argv, str(tmp_path), dict(world.env))
    finally:
        program.close()
    deadline = time.monotonic() + 10
    while not checked_ran.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pid > 0
    assert checked_ran.exists()
    assert not payload_ran.exists()


# --- launching --------------------------------------------------------------------------


def test_launch_then_ping_answered(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=0.3)
    world.write_launch_config(app)
    assert not world.ping()
    ensure(world.launcher())
    assert world.ping()
    (launch,) = world.launches()
    assert launch["argv"] == [str(app), "--background"]
    assert world.lock_is_free()
    assert stat.S_IMODE(world.state_dir.stat().st_mode) == 0o700


def test_symlinked_executable_is_followed(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=0)
    link = world.root / "app-link"
    link.symlink_to(app)
    world.write_launch_config(link)
    ensure(world.launcher())
    (launch,) = world.launches()
    assert launch["argv"] == [str(link), "--background"]


def test_running_core_means_no_launch(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=0)
    world.write_launch_config(app)
    world.start_app_directly(app)
    assert wait_for(world.ping)
    ensure(world.launcher())
    assert world.launches() == []


def test_launched_app_is_detached_and_clean(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=0)
    world.write_launch_config(app)
    world.env.update(
        {"_PYI_APPLICATION_HOME_DIR": "/x", "_PYI_ARCHIVE_FILE": "/x", "_MEIPASS2": "/x"}
    )
    world.env["LD_LIBRARY_PATH"] = "/user/lib"  # unfrozen host: the user's own, kept
    ensure(world.launcher())
    (launch,) = world.launches()
    assert launch["sid"] == launch["pid"] != os.getsid(0)
    assert os.path.realpath(launch["cwd"]) == os.path.realpath(world.user_home)
    assert launch["stdio_devnull"] == [True, True, True]
    assert launch["extra_fds"] == []
    assert launch["pyi_env"] == []
    assert launch["ld_library_path"] == "/user/lib"


def test_frozen_host_environment_is_restored() -> None:
    host_env = {
        "PATH": "/bin",
        "_MEIPASS2": "/tmp/_MEI1",
        "_PYI_PARENT_PROCESS_LEVEL": "1",
        "LD_LIBRARY_PATH": "/bundle:/user/lib",
        "LD_LIBRARY_PATH_ORIG": "/user/lib",
        "LIBPATH": "/bundle",
        "DYLD_LIBRARY_PATH": "/user/dyld",
    }
    assert child_environment(host_env, frozen=True) == {
        "PATH": "/bin",
        "LD_LIBRARY_PATH": "/user/lib",
        "DYLD_LIBRARY_PATH": "/user/dyld",
    }
    assert child_environment({"LD_LIBRARY_PATH": "/bundle"}, frozen=True) == {}
    unfrozen = child_environment(host_env, frozen=False)
    assert unfrozen["LD_LIBRARY_PATH"] == "/bundle:/user/lib"
    assert "_MEIPASS2" not in unfrozen and "_PYI_PARENT_PROCESS_LEVEL" not in unfrozen


def test_concurrent_callers_share_one_launch(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=0.5)
    world.write_launch_config(app)
    launcher = world.launcher()
    barrier = threading.Barrier(8)
    outcomes: list[BaseException | None] = []

    def call() -> None:
        barrier.wait()
        try:
            ensure(launcher)
        except BaseException as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes == [None] * 8
    assert len(world.launches()) == 1
    assert world.ping()


def test_concurrent_callers_share_one_failure(world: LaunchWorld) -> None:
    app = world.write_app(mode="never", delay_s=0)
    world.write_launch_config(app)
    launcher = world.launcher(world.config.replace(launch_timeout_ms=SHORT_TIMEOUT_MS))
    results: list[HostError] = []
    lock = threading.Lock()

    def call() -> None:
        err = launch_error(launcher)
        with lock:
            results.append(err)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 4
    assert len({id(r) for r in results}) == 4  # each caller gets its own copy
    assert all(r.details["stage"] == "wait_for_core_runtime" for r in results)
    assert len(world.launches()) == 1


def test_two_host_processes_launch_once(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=0.5)
    world.write_launch_config(app)
    go = world.root / "go"
    procs = [world.run_launcher_process(go) for _ in range(2)]
    go.touch()
    outputs = []
    for proc in procs:
        assert proc.stdout is not None
        outputs.append(json.loads(proc.stdout.readline()))
        assert proc.wait(timeout=30) == 0
    assert outputs == [{"ok": True}, {"ok": True}]
    assert len(world.launches()) == 1


def test_lock_held_elsewhere_and_core_appears(world: LaunchWorld) -> None:
    import fcntl

    app = world.write_app(delay_s=0.3)
    world.write_launch_config(app)
    world.state_dir.mkdir()
    fd = os.open(world.state_dir / "launch.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        world.start_app_directly(app)  # the other host's launch, as far as we can tell
        ensure(world.launcher())
    finally:
        os.close(fd)
    assert world.launches() == []
    assert len(world.launches(include_manual=True)) == 1


def test_lock_held_elsewhere_and_no_core(world: LaunchWorld) -> None:
    import fcntl

    app = world.write_app()
    world.write_launch_config(app)
    world.state_dir.mkdir()
    fd = os.open(world.state_dir / "launch.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        err = launch_error(world.launcher(world.config.replace(launch_timeout_ms=SHORT_TIMEOUT_MS)))
        elapsed = time.monotonic() - started
    finally:
        os.close(fd)
    assert (err.code, err.message) == UNAVAILABLE
    assert err.details == {
        "stage": "launch_desktop",
        "reason": "launch lock not acquired",
        "timeoutMs": SHORT_TIMEOUT_MS,
    }
    assert 1.4 <= elapsed < 10
    assert world.launches() == []


# --- readiness --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode", ["never", "silent", "failing"], ids=["no-runtime", "never-answers", "ping-not-ok"]
)
def test_app_never_ready_times_out(world: LaunchWorld, mode: str) -> None:
    app = world.write_app(mode=mode, delay_s=0)
    world.write_launch_config(app)
    config = load_config({**world.env, "PEDELEC_LAUNCH_TIMEOUT_MS": str(SHORT_TIMEOUT_MS)})
    config = config.replace(connect_timeout_ms=500)
    started = time.monotonic()
    err = launch_error(world.launcher(config))
    elapsed = time.monotonic() - started
    assert (err.code, err.message) == UNAVAILABLE
    assert err.details == {
        "stage": "wait_for_core_runtime",
        "timeoutMs": SHORT_TIMEOUT_MS,
        "retryIntervalMs": 200,
    }
    assert 1.4 <= elapsed < 10
    (launch,) = world.launches()
    if mode != "never":
        assert (world.home / "runtime.json").exists()
    assert process_running(launch["pid"])  # never killed


@pytest.mark.parametrize("stale", ["dead-pid", "closed-port", "port-reused"])
def test_stale_runtime_json_means_launch(world: LaunchWorld, stale: str) -> None:
    app = world.write_app(delay_s=0.2)
    world.write_launch_config(app)
    with socket.socket() as squatter:
        if stale == "dead-pid":
            write_runtime(world.home, free_port(), dead_pid())
        elif stale == "closed-port":
            write_runtime(world.home, free_port(), os.getpid())
        else:  # something else listens there now: accepts, never answers a ping
            squatter.bind(("127.0.0.1", 0))
            squatter.listen(8)
            write_runtime(world.home, squatter.getsockname()[1], os.getpid())
        ensure(world.launcher(world.config.replace(connect_timeout_ms=500)))
    assert len(world.launches()) == 1
    assert world.ping()


# --- failures and lifetime ------------------------------------------------------------


def test_a_script_whose_interpreter_is_missing_is_refused_before_spawning(
    world: LaunchWorld,
) -> None:
    """An interpreter under a folder of the test's own that does not exist (never a fixed
    path such as /nonexistent, which a machine may have)."""
    absent = world.root / "absent"
    app = world.root / "broken-app"
    app.write_text(f"#!{absent}/interpreter\n")
    app.chmod(0o755)
    world.write_launch_config(app)
    err = launch_error(world.launcher())
    assert (err.details["stage"], err.details["violation"]) == ("read_launch_config", "interpreter")
    assert f"{absent} cannot be read" in err.details["error"]
    assert world.lock_is_free()


def test_spawn_failure(world: LaunchWorld) -> None:
    app = world.root / "broken-app"
    app.write_text("\x7fELF not really\n")
    app.chmod(0o755)
    config_path = world.write_launch_config(app)
    err = launch_error(world.launcher())
    assert (err.code, err.message) == UNAVAILABLE
    reason = err.details.pop("reason")
    assert isinstance(reason, str) and reason
    assert err.details == {
        "stage": "spawn_desktop_app",
        "launchConfigPath": str(config_path),
        "executablePath": str(app),
    }
    assert world.lock_is_free()


def test_shutdown_stops_waiting_and_app_keeps_starting(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=1.0)
    world.write_launch_config(app)
    stopping = threading.Event()
    launcher = world.launcher(is_shutting_down=stopping.is_set)
    errors_seen: list[HostError] = []

    def call() -> None:
        errors_seen.append(launch_error(launcher))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    assert wait_for(lambda: len(world.launches()) == 1)
    stopping.set()
    stopped_at = time.monotonic()
    for t in threads:
        t.join(5)
    assert time.monotonic() - stopped_at < 1.0
    assert len(errors_seen) == 3
    assert all(e.code == errors.CORE_RUNTIME_UNAVAILABLE for e in errors_seen)
    assert wait_for(world.ping)  # the app went on starting its Core
    assert len(world.launches()) == 1


def test_launched_app_survives_sigkill_of_its_host(world: LaunchWorld) -> None:
    app = world.write_app(delay_s=1.0)
    world.write_launch_config(app)
    go = world.root / "go"
    go.touch()
    host = world.run_launcher_process(go)
    assert wait_for(lambda: len(world.launches()) == 1)
    host.kill()  # SIGKILL, as Chrome does ~2 s after closing stdin
    assert host.wait(timeout=10) == -signal.SIGKILL
    (launch,) = world.launches()
    assert process_running(launch["pid"])
    assert wait_for(world.ping)
    assert process_running(launch["pid"])
    assert world.lock_is_free()  # released by the host's death, not held by the app


# --- through the host process, as Chrome runs it ----------------------------------------


@pytest.fixture
def host_world(world: LaunchWorld) -> Iterator[tuple[LaunchWorld, list[HostProcess]]]:
    hosts: list[HostProcess] = []
    try:
        yield world, hosts
    finally:
        for host in hosts:
            host.stop()
        for host in hosts:
            host.check_protocol()


def start_host(world: LaunchWorld, hosts: list[HostProcess], **env: str) -> HostProcess:
    host = HostProcess(default_host_command(), env={**world.env, **env}, cwd=str(REPO))
    hosts.append(host)
    return host


def test_host_no_core_no_launch_config(
    host_world: tuple[LaunchWorld, list[HostProcess]],
) -> None:
    world, hosts = host_world
    host = start_host(world, hosts)
    message = {
        "type": "send_text",
        "requestId": "req_missing_runtime",
        "threadId": "thread_1",
        "message": "hello",
    }
    reply = host.request(message)
    assert reply["requestId"] == "req_missing_runtime"
    assert reply["ok"] is False
    error = reply["error"]
    assert (error["code"], error["message"]) == UNAVAILABLE
    assert isinstance(error["details"].pop("detail"), str)
    assert error["details"] == {
        "stage": "read_launch_config",
        "reason": "cannot read launch config",
        "launchConfigPath": str(world.home / "app-launch.json"),
    }


def test_host_concurrent_requests_launch_once_and_are_answered(
    host_world: tuple[LaunchWorld, list[HostProcess]],
) -> None:
    world, hosts = host_world
    world.write_launch_config(world.write_app(delay_s=0.3))
    write_runtime(world.home, free_port(), os.getpid())  # a closed port (§8 #22 contrast)
    host = start_host(world, hosts)
    ids = [f"req_{i}" for i in range(8)]
    for request_id in ids:
        host.send({"type": "list_providers", "requestId": request_id})
    replies = [host.read(timeout=30) for _ in ids]  # in any order (spec 7.1)
    assert sorted(reply["requestId"] for reply in replies) == ids
    assert all(reply["ok"] is True for reply in replies), replies
    assert len(world.launches()) == 1


def test_host_launch_timeout_reaches_the_page(
    host_world: tuple[LaunchWorld, list[HostProcess]],
) -> None:
    world, hosts = host_world
    world.write_launch_config(world.write_app(mode="silent", delay_s=0))
    host = start_host(world, hosts, PEDELEC_LAUNCH_TIMEOUT_MS=str(SHORT_TIMEOUT_MS))
    reply = host.request({"type": "list_providers", "requestId": "req_t"}, timeout=30)
    assert reply["requestId"] == "req_t"
    assert reply["error"]["details"] == {
        "stage": "wait_for_core_runtime",
        "timeoutMs": SHORT_TIMEOUT_MS,
        "retryIntervalMs": 200,
    }


def test_host_eof_during_launch_exits_promptly_and_app_keeps_starting(
    host_world: tuple[LaunchWorld, list[HostProcess]],
) -> None:
    world, hosts = host_world
    world.write_launch_config(world.write_app(delay_s=1.5))
    host = start_host(world, hosts)
    host.send({"type": "list_providers", "requestId": "req_eof"})
    assert wait_for(lambda: len(world.launches()) == 1)
    host.close_stdin()
    closed_at = time.monotonic()
    assert host.wait(timeout=5) == 0
    # Spec 7.13: well within 2 s. The launcher's own part is bounded tighter in-process
    # (test_shutdown_stops_waiting_and_app_keeps_starting); this adds interpreter exit.
    assert time.monotonic() - closed_at < 3.0
    (launch,) = world.launches()
    assert wait_for(world.ping)
    assert process_running(launch["pid"])


def test_host_sigkilled_during_launch_app_survives(
    host_world: tuple[LaunchWorld, list[HostProcess]],
) -> None:
    world, hosts = host_world
    world.write_launch_config(world.write_app(delay_s=1.0))
    host = start_host(world, hosts)
    host.send({"type": "list_providers", "requestId": "req_kill"})
    assert wait_for(lambda: len(world.launches()) == 1)
    host.proc.kill()
    host.wait(timeout=10)
    (launch,) = world.launches()
    assert wait_for(world.ping)
    assert process_running(launch["pid"])
    assert world.lock_is_free()
