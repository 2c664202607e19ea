"""Pure tests of runtime.json discovery (spec 3.1, 7.14 step 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from native_host.core.discovery import CoreUnreachableError, parse_runtime, read_runtime
from tests.support.runtime import runtime_document

pytestmark = pytest.mark.process

GOOD = runtime_document(52814, 4242)


def test_a_valid_runtime_file_gives_the_endpoint() -> None:
    endpoint = parse_runtime(json.dumps(GOOD))
    assert (endpoint.port, endpoint.pid, endpoint.endpoint) == (52814, 4242, "127.0.0.1:52814")


def test_the_endpoint_wins_over_a_disagreeing_port() -> None:
    assert parse_runtime(json.dumps({**GOOD, "port": 1})).port == 52814


@pytest.mark.parametrize(
    "change",
    [
        {"protocol": "pedelec-core-ipc-v2"},
        {"host": "localhost"},
        {"endpoint": "127.0.0.1:0"},
        {"endpoint": "127.0.0.1:65536"},
        {"endpoint": "10.0.0.1:52814"},
        {"endpoint": 52814},
        {"pid": 0},
        {"pid": "4242"},
        {"pid": True},
    ],
)
def test_invalid_fields_make_the_core_undiscoverable(change: dict[str, object]) -> None:
    with pytest.raises(CoreUnreachableError) as caught:
        parse_runtime(json.dumps({**GOOD, **change}))
    assert caught.value.stage == "discover_core"
    assert isinstance(caught.value.details["reason"], str)


@pytest.mark.parametrize("text", ["", "{", "[]", '{"protocol": "pedelec-core-ipc-v1"'])
def test_half_written_or_odd_files_are_undiscoverable(text: str) -> None:
    with pytest.raises(CoreUnreachableError):
        parse_runtime(text)


def test_missing_file_and_dead_pid(tmp_path: Path) -> None:
    with pytest.raises(CoreUnreachableError, match="not found"):
        read_runtime(tmp_path)
    # A child that exited and was reaped: a pid nobody holds (fork() warns on 3.12+).
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(child.stdout)
    (tmp_path / "runtime.json").write_text(json.dumps({**GOOD, "pid": dead}))
    with pytest.raises(CoreUnreachableError, match="stale"):
        read_runtime(tmp_path)
    assert read_runtime(tmp_path, check_pid=False).pid == dead
    (tmp_path / "runtime.json").write_text(json.dumps({**GOOD, "pid": os.getpid()}))
    assert read_runtime(tmp_path).pid == os.getpid()


def test_no_home_at_all_is_ipc_unavailable_not_a_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    from native_host.admission import Attempt
    from native_host.config import HostConfig
    from native_host.errors import HostError
    from native_host.gateway import CoreGateway

    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no passwd entry either
    gateway = CoreGateway(HostConfig(), {})  # no HOME, no PEDELEC_HOME
    with pytest.raises(HostError) as caught:
        gateway.request(Attempt(), {"requestId": "r", "type": "ping", "payload": {}}, 1000)
    assert caught.value.code == "IPC_UNAVAILABLE"
    assert caught.value.message == "cannot resolve user home directory for runtime.json"
    assert caught.value.stage == "discover_core"
