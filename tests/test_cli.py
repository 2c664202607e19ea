"""The entry point: the browser's start relays, commands dispatch, anything else is a
usage error (spec 7.11 a, issue 12)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import OFFICIAL_EXTENSION_ID, __version__
from native_host.cli import SUBCOMMANDS, started_by_browser
from tests.support.markers import POSIX, os_skip_reason
from tests.support.runtime import write_runtime

pytestmark = pytest.mark.process


@pytest.mark.parametrize("word", sorted(SUBCOMMANDS))
def test_every_subcommand_module_has_a_main(word: str) -> None:
    module = importlib.import_module(SUBCOMMANDS[word][0])
    assert callable(module.main)


def test_version_and_help() -> None:
    version = subprocess.run(
        [sys.executable, "-m", "native_host", "version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"pedelec-native-host {__version__}"
    usage = subprocess.run(
        [sys.executable, "-m", "native_host", "--help"], capture_output=True, text=True, check=True
    )
    for word in SUBCOMMANDS:
        assert word in usage.stdout


def test_a_relay_start_imports_no_subcommand_and_no_pydantic() -> None:
    """The host starts for every page load: the relay must not pay for what a ping
    does not use (spec 9.7)."""
    probe = (
        "import sys\n"
        "import native_host.relay, native_host.config, native_host.logs, native_host.origins\n"
        "heavy = [m for m in ('pydantic', 'native_host.devcore', 'native_host.install',\n"
        "         'native_host.launch', 'native_host.policy', 'native_host.subscriptions')\n"
        "         if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


# --- the CLI a person meets (issue 12) -------------------------------------------------------
OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"


@pytest.mark.parametrize(
    ("args", "stdin_is_terminal", "relay"),
    [
        ([OFFICIAL], True, True),
        ([OFFICIAL, "--parent-window=0"], False, True),
        (["--parent-window=1234", OFFICIAL], True, True),
        ([], False, True),  # a sandboxed-browser proxy that passes nothing
        ([], True, False),  # a person typing the bare command
        (["instal"], False, False),  # a typo in a script still fails loudly
        (["instal"], True, False),
        (["install"], False, False),
        (["-V"], False, False),
    ],
)
def test_relay_only_when_the_browser_runs_the_host(
    args: list[str], stdin_is_terminal: bool, relay: bool
) -> None:
    assert started_by_browser(args, stdin_is_terminal) is relay


def run_host(
    *args: str, terminal: bool = False, timeout: float = 20.0
) -> subprocess.CompletedProcess[str]:
    """The host as a person starts it: stdin a real pseudo-terminal, or a closed pipe.

    A host that wrongly relays waits on the terminal for frames: the timeout fails it."""
    if not terminal:
        return subprocess.run(
            [sys.executable, "-m", "native_host", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if os.name != "posix":
        pytest.skip(os_skip_reason(POSIX, "a pseudo-terminal stands in for a person's"))
    import pty

    controller, terminal_end = pty.openpty()
    try:
        return subprocess.run(
            [sys.executable, "-m", "native_host", *args],
            stdin=terminal_end,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        os.close(terminal_end)
        os.close(controller)


def test_the_bare_command_in_a_terminal_explains_itself() -> None:
    done = run_host(terminal=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "started by the browser" in done.stderr
    assert "pedelec-native-host demo" in done.stderr
    assert "pedelec-native-host doctor" in done.stderr


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_a_mistyped_command_is_a_usage_error_with_a_suggestion(terminal: bool) -> None:
    done = run_host("instal", terminal=terminal)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "unknown command 'instal', did you mean 'install'?" in done.stderr


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("doctr", "unknown command 'doctr', did you mean 'doctor'?"),
        ("--verison", "unknown option '--verison', did you mean '--version'?"),
        ("frobnicate", "unknown command 'frobnicate' ("),
    ],
)
def test_other_unknown_words(word: str, expected: str) -> None:
    done = run_host(word, terminal=True)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "pedelec-native-host help" in done.stderr


@pytest.mark.parametrize("word", ["-V", "--version", "version"])
def test_every_version_spelling(word: str) -> None:
    done = run_host(word, terminal=True)
    assert (done.returncode, done.stdout) == (0, f"pedelec-native-host {__version__}\n")
    assert run_host(word, "extra").returncode == 2


def test_help_topic_shows_that_commands_options() -> None:
    done = run_host("help", "install", terminal=True)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: pedelec-native-host install")
    assert "--extension-id" in done.stdout
    listing = run_host("help")
    assert listing.returncode == 0 and "help [COMMAND]" in listing.stdout
    wrong = run_host("help", "instal")
    assert wrong.returncode == 2
    assert "unknown help topic 'instal', did you mean 'install'?" in wrong.stderr
    assert run_host("help", "install", "doctor").returncode == 2


@pytest.mark.parametrize("word", sorted(SUBCOMMANDS))
def test_every_command_exits_2_on_a_usage_error(word: str, tmp_path: Path) -> None:
    """argparse's convention, the same for every command: 2 and one line on stderr
    (tests/test_cli_usage.py walks every option's bad values)."""
    env = {**os.environ, "HOME": str(tmp_path), "PEDELEC_HOME": str(tmp_path / "p")}
    done = subprocess.run(
        [sys.executable, "-m", "native_host", word, "--no-such-option"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"pedelec-native-host {word}: error: "), line
    assert line.endswith(f"(see `pedelec-native-host {word} --help`)"), line
    assert done.stdout == ""


@pytest.mark.parametrize("args", [[OFFICIAL], []], ids=["origin", "no-arguments"])
def test_a_relay_start_decides_without_heavy_imports(args: list[str]) -> None:
    """The real start, traced by `-X importtime`: deciding "relay" costs no argparse,
    difflib or pydantic (they are for the commands a person runs)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "native_host", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "native_host.relay" in imported
    assert imported & {"argparse", "difflib", "pydantic"} == set()


# --- dev-core never touches the Desktop's files -----------------------------------------------
def serve_pings(server: socket.socket) -> None:
    """Answer each connection's first line as a Core answers `ping` (spec 3.4)."""
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            line = conn.makefile("rb").readline()
            request_id = json.loads(line)["requestId"]
            reply = {"requestId": request_id, "ok": True, "result": {"connected": True}}
            conn.sendall(json.dumps(reply).encode() + b"\n")


@pytest.fixture
def live_desktop() -> Iterator[socket.socket]:
    """A loopback Core that answers pings, standing in for Pedelec Desktop's (this process)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        threading.Thread(target=serve_pings, args=(server,), daemon=True).start()
        yield server
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)


def desktop_runtime(home: Path, port: int, pid: int) -> Path:
    """The `runtime.json` the Desktop writes (spec 3.1): no dev-Core marker."""
    path = write_runtime(home, port, pid)
    path.chmod(0o600)
    return path


def dev_core_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEDELEC_")}
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return env


def start_dev_core(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "native_host", "dev-core", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    return process, process.stdout.readline()


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=10)
    finally:
        process.kill()
        process.wait()


def test_dev_core_without_home_uses_a_fresh_temporary_home(
    tmp_path: Path, live_desktop: socket.socket
) -> None:
    env = dev_core_env(tmp_path)
    real_home = tmp_path / "home" / ".pedelec"
    desktop = desktop_runtime(real_home, live_desktop.getsockname()[1], os.getpid())
    before = desktop.read_bytes(), desktop.stat().st_mtime_ns
    process, banner = start_dev_core(env)
    try:
        match = re.fullmatch(
            r"dev-core listening on 127\.0\.0\.1:(\d+) \(generation current, home (.+)\)\n", banner
        )
        assert match, banner
        home = Path(match.group(2))
        assert home.parent == tmp_path / "tmp" and home != real_home
        runtime = json.loads((home / "runtime.json").read_text())
        assert runtime["port"] == int(match.group(1)) and runtime["devCore"] is True
    finally:
        assert stop(process) == 0
    assert not home.exists()
    assert (desktop.read_bytes(), desktop.stat().st_mtime_ns) == before
    assert sorted(p.name for p in real_home.iterdir()) == ["runtime.json"]


def test_dev_core_refuses_a_home_served_by_a_running_desktop(
    tmp_path: Path, live_desktop: socket.socket
) -> None:
    home = tmp_path / "home" / ".pedelec"
    port = live_desktop.getsockname()[1]
    desktop = desktop_runtime(home, port, os.getpid())
    before = desktop.read_bytes(), desktop.stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-m", "native_host", "dev-core", "--home", str(home)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        env=dev_core_env(tmp_path),
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"belongs to a running Core (pid {os.getpid()}, 127.0.0.1:{port})" in done.stderr
    assert "Leave out --home" in done.stderr
    assert (desktop.read_bytes(), desktop.stat().st_mtime_ns) == before
    assert sorted(p.name for p in home.iterdir()) == ["runtime.json"]


@pytest.mark.parametrize("state", ["dead pid", "closed port", "port squatter", "dev core"])
def test_dev_core_replaces_a_runtime_json_no_live_desktop_serves(
    tmp_path: Path, state: str
) -> None:
    """What the host itself treats as "no Core" (or another dev Core) is fair to replace."""
    home = tmp_path / "home" / ".pedelec"
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        if state == "closed port":
            server.close()
            desktop_runtime(home, port, os.getpid())
        elif state == "port squatter":  # a live pid, but what listens is not a Core
            server.listen()
            desktop_runtime(home, port, os.getpid())
        elif state == "dead pid":
            gone = subprocess.Popen([sys.executable, "-c", ""])
            gone.wait()
            desktop_runtime(home, port, gone.pid)
        else:
            runtime = desktop_runtime(home, port, os.getpid())
            runtime.write_text(json.dumps({**json.loads(runtime.read_text()), "devCore": True}))
        process, banner = start_dev_core(dev_core_env(tmp_path), "--home", str(home))
        try:
            assert banner.startswith("dev-core listening on"), process.stderr
            assert json.loads((home / "runtime.json").read_text())["pid"] == process.pid
        finally:
            assert stop(process) == 0
