"""runtime.json lifecycle, in-process and through the CLI subprocess (spec 3.1, issue 2)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from native_host.devcore import DevCore, DevCoreSettings
from tests.support.core_lines import ClientFactory, CoreFactory, LineClient

pytestmark = pytest.mark.process


def read_runtime(home: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((home / "runtime.json").read_text())
    return data


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_runtime_json_written_private_and_removed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with DevCore(DevCoreSettings(home=home)) as core:
        data = read_runtime(home)
        assert data == {
            "protocol": "pedelec-core-ipc-v1",
            "host": "127.0.0.1",
            "port": core.port,
            "endpoint": core.endpoint,
            "pid": os.getpid(),
            "devCore": True,
        }
        assert core.endpoint == f"127.0.0.1:{core.port}" and core.port > 0
        assert stat.S_IMODE((home / "runtime.json").stat().st_mode) == 0o600
        assert [p.name for p in home.iterdir() if p.name.startswith(".runtime.")] == []
    assert not (home / "runtime.json").exists()
    assert refused(core.port)


def test_crash_leaves_runtime_json(make_core: CoreFactory, connect: ClientFactory) -> None:
    core = make_core()
    client = connect(core)
    client.result("create_thread", {"provider": "codex"})
    stream = connect(core)
    stream.result("subscribe_thread", {"threadId": "t000001"})
    core.crash()
    assert client.read_raw() is None and stream.read_raw() is None
    assert read_runtime(core.settings.home)["port"] == core.port
    assert refused(core.port)
    successor = make_core()
    assert read_runtime(core.settings.home)["port"] == successor.port
    assert (
        LineClient(successor.port).result("create_thread", {"provider": "codex"})["threadId"]
        == "t000001"
    )


def test_stop_keeps_a_successors_runtime_json(make_core: CoreFactory) -> None:
    first = make_core()
    second = make_core()
    first.stop()
    assert read_runtime(second.settings.home)["port"] == second.port


def run_cli(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "native_host", "dev-core", "--home", str(tmp_path / "home"), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()
    return process, banner


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)], ids=["TERM", "INT"]
)
def test_cli_serves_and_cleans_up_on_signal(tmp_path: Path, signum: int, status: int) -> None:
    """SIGTERM is how a script stops it (0); Ctrl-C is a person's (130, as every command)."""
    record = tmp_path / "record.jsonl"
    process, banner = run_cli(tmp_path, "--generation", "legacy", "--record", str(record))
    try:
        home = tmp_path / "home"
        port = int(read_runtime(home)["port"])  # type: ignore[call-overload]
        assert (
            banner == f"dev-core listening on 127.0.0.1:{port} (generation legacy, home {home})\n"
        )
        client = LineClient(port)
        assert client.result("ping", {}, callerSdkVersion="1.2.3") == {"connected": True}
        client.close()
        process.send_signal(signum)
        assert process.wait(timeout=5) == status
    finally:
        process.kill()
        process.wait()
    assert not (home / "runtime.json").exists()
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert len(lines) == 1
    assert lines[0]["type"] == "ping" and lines[0]["callerSdkVersion"] == "1.2.3"
    assert lines[0]["envelope"]["payload"] == {} and lines[0]["connectionId"] == 1


def test_cli_exit_on_type_and_faults_file(tmp_path: Path) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text('{"exitOnType": "create_thread", "delayMs": {"ping": 1}}')
    process, _ = run_cli(tmp_path, "--faults", f"@{faults}")
    try:
        client = LineClient(int(read_runtime(tmp_path / "home")["port"]))  # type: ignore[call-overload]
        assert client.result("ping")["version"] == "0.4.0"
        client.send({"requestId": "c", "type": "create_thread", "payload": {"provider": "codex"}})
        assert client.read_raw() is None
        assert process.wait(timeout=5) == 3
    finally:
        process.kill()
        process.wait()
    assert (tmp_path / "home" / "runtime.json").exists()


def test_cli_rejects_bad_faults(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "native_host",
            "dev-core",
            "--home",
            str(tmp_path),
            "--faults",
            '{"nope":1}',
        ],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 2 and "--faults" in done.stderr
    assert not (tmp_path / "runtime.json").exists()
