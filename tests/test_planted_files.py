"""Files the host reads, planted or mangled (docs/security.md): each is refused with its
path and reason, answered within seconds in bounded memory, and the host keeps serving.

Through the real host process; the genuine Core still works afterwards in every case.
Ownership by another user is in tests/test_other_users.py (real throwaway users).
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.runtime import runtime_document
from tests.support.world import HostWorld

pytestmark = pytest.mark.process


def ping(host: Any, rid: str = "p", timeout: float = 10) -> dict[str, Any]:
    reply: dict[str, Any] = host.request({"type": "ping", "requestId": rid}, timeout=timeout)
    return reply


def runtime_reason(reply: dict[str, Any]) -> str:
    """The discovery reason of a refused ping (no launch config: the launch fails)."""
    assert reply["ok"] is False, reply
    return str(reply["error"]["details"].get("reason", ""))


def test_a_symlinked_runtime_json_is_not_followed(world: HostWorld) -> None:
    core = world.start_core("legacy")
    runtime = world.home / "runtime.json"
    real = world.root / "elsewhere.json"
    os.replace(runtime, real)
    runtime.symlink_to(real)
    host = world.start_host()
    reply = ping(host)
    assert reply["error"]["code"] == "CORE_RUNTIME_UNAVAILABLE"
    assert core.connection_count == 0, "the host followed the symlink to the Core"
    runtime.unlink()
    os.replace(real, runtime)
    assert ping(host, "again")["ok"]


def test_a_fifo_as_runtime_json_is_answered_not_a_hang(world: HostWorld) -> None:
    os.mkfifo(world.home / "runtime.json")
    host = world.start_host()
    started = time.monotonic()
    reply = ping(host)
    assert time.monotonic() - started < 5
    assert reply["ok"] is False
    assert host.proc.poll() is None


def test_a_huge_runtime_json_is_refused_without_being_read(world: HostWorld) -> None:
    runtime = world.home / "runtime.json"
    with runtime.open("wb") as handle:
        handle.truncate(1 << 30)  # 1 GiB, sparse: reading it whole would take 2 GB
    host = world.start_host()
    started = time.monotonic()
    reply = ping(host)
    assert time.monotonic() - started < 5
    assert reply["ok"] is False
    status = Path(f"/proc/{host.proc.pid}/status").read_text()
    peak = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
    assert peak < 200_000, f"peak RSS {peak} KiB"


@pytest.mark.parametrize("where", ["file", "directory"])
def test_runtime_json_others_can_write_is_refused(world: HostWorld, where: str) -> None:
    core = world.start_core("legacy")
    target = world.home / "runtime.json" if where == "file" else world.home
    target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWOTH)
    host = world.start_host()
    reply = ping(host)
    assert reply["ok"] is False
    assert core.connection_count == 0
    target.chmod(stat.S_IMODE(target.stat().st_mode) & ~stat.S_IWOTH)
    assert ping(host, "fixed")["ok"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"pid": 2**63}, "pid is not a positive 32-bit integer"),
        ({"pid": 2**32}, "pid is not a positive 32-bit integer"),
        ({"endpoint": "127.0.0.1:\u0665\u0665\u0665\u0665"}, "endpoint is not"),
        ({"endpoint": "127.0.0.1:\u00b2"}, "endpoint is not"),
    ],
    ids=["pid-2^63", "pid-2^32", "arabic-indic-digits", "superscript-two"],
)
def test_odd_runtime_values_are_a_discovery_error(
    world: HostWorld, change: dict[str, Any], why: str
) -> None:
    runtime = runtime_document(1, os.getpid())
    (world.home / "runtime.json").write_text(json.dumps({**runtime, **change}))
    reply = ping(world.start_host())
    assert reply["error"]["code"] == "CORE_RUNTIME_UNAVAILABLE"
    assert reply["error"]["details"]["stage"] == "read_launch_config"  # then no launch config
    log = world.log_text()
    assert why in log


def test_deeply_nested_runtime_json_is_a_discovery_error(world: HostWorld) -> None:
    (world.home / "runtime.json").write_text("[" * 50_000)  # deep, yet under the size cap
    host = world.start_host()
    reply = ping(host)
    assert reply["error"]["message"] == "pedelec-app is not running"
    assert "runtime.json is not valid JSON" in world.log_text()


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("\u00b2", False), ("1" * 25, False), ("\u0661\u0662", False), (" 1500 ", True), ("0", False)],
    ids=["superscript", "25-digits", "arabic-indic", "spaces", "zero"],
)
def test_timeouts_from_the_environment_are_parsed_strictly(
    world: HostWorld, value: str, accepted: bool
) -> None:
    world.start_core("legacy")
    host = world.start_host(
        PEDELEC_CONNECT_TIMEOUT_MS=value, PEDELEC_CORE_RESPONSE_TIMEOUT_MS=value
    )
    assert ping(host)["ok"]
    ignored = f"PEDELEC_CONNECT_TIMEOUT_MS={value!r} is not an integer" in world.log_text()
    assert ignored is not accepted


def test_an_invalid_config_value_is_reported_and_the_defaults_apply(world: HostWorld) -> None:
    world.start_core("legacy")
    world.write_config({"coreResponseTimeoutMs": 10**25})
    host = world.start_host()
    assert ping(host)["ok"]
    assert "coreResponseTimeoutMs must be an integer from 1 to 3600000" in world.log_text()


def test_under_umask_000_nothing_the_host_creates_is_open_to_others(world: HostWorld) -> None:
    world.start_core("legacy")
    state = Path(world.env["PEDELEC_NATIVE_HOST_STATE_DIR"])
    logs = Path(world.env["PEDELEC_NATIVE_HOST_LOG_DIR"])
    config = world.config_dir / "fresh"
    host = world.start_host(
        prefix=("sh", "-c", 'umask 000 && exec "$@"', "umask000"),
        PEDELEC_NATIVE_HOST_CONFIG_DIR=str(config),
    )
    assert ping(host)["ok"]
    approve = {"type": "approve_origin", "requestId": "a", "origin": "https://app.example.com"}
    assert host.request(approve)["ok"]
    created = [logs, *logs.iterdir(), config, *config.iterdir()]
    assert (config / "origins.json") in created
    for path in created:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
    assert not state.exists() or stat.S_IMODE(state.stat().st_mode) & 0o077 == 0


def test_a_fifo_as_the_policy_fails_closed_without_hanging(world: HostWorld) -> None:
    world.start_core("legacy")
    os.mkfifo(world.config_dir / "origins.json")
    host = world.start_host()
    done = threading.Event()
    reply = host.request(
        {
            "type": "create_thread",
            "requestId": "c",
            "provider": "codex",
            "callerOrigin": "https://app.example.com",
        }
    )
    done.set()
    assert reply["error"]["details"]["reason"] == "policy_invalid"
    assert "is not a regular file" in reply["error"]["details"]["error"]
    assert ping(host)["ok"]
