"""A Core that accepts a connection and closes it before the host writes a byte (shutting
down, overloaded) is alive: the gateway opens one more connection (nothing was sent,
spec 7.5), and if that one is closed too it answers at connect_core, never launching the
Desktop.

In-process against a real dev Core (fault `closeOnAccept`) with the real peer check. When
the close lands is the Core's timing, so `connect_socket` is wrapped to wait until the
Core closed each connection it will close: the order "closed before the check" is then
certain. tests/test_closing_core.py covers either order through the real host.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import errors, gateway
from native_host.admission import Attempt
from native_host.config import HostConfig
from native_host.core.discovery import CoreEndpoint
from native_host.devcore import DevCore, DevCoreSettings, Faults
from native_host.errors import HostError
from native_host.gateway import CoreGateway

pytestmark = pytest.mark.unit

OK_SEND = {"send_text": {"ok": True, "result": {"threadId": "t000001"}}}
ENVELOPE = {"requestId": "r1", "type": "send_text", "payload": {"threadId": "t1"}}


class Rig:
    def __init__(self, root: Path, closes: int) -> None:
        home = root / "home"
        home.mkdir()
        faults = Faults(close_on_accept=closes, canned_responses=OK_SEND)
        self.core = DevCore(DevCoreSettings(home=home, generation="legacy", faults=faults))
        self.core.start()
        self.marker = root / "launched"
        app = root / "app"
        app.write_text(f"#!/bin/sh\ntouch {self.marker}\n")
        app.chmod(0o755)
        (home / "app-launch.json").write_text(
            f'{{"version":1,"executablePath":"{app}","backgroundArgs":["--background"]}}'
        )
        self.gateway = CoreGateway(HostConfig(), {"PEDELEC_HOME": str(home), "HOME": str(root)})

    def close(self) -> None:
        self.gateway.close_all()
        self.core.stop()


@pytest.fixture
def closing_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Rig]:
    closes: int = request.param
    rig = Rig(tmp_path, closes)
    connect = gateway.connect_socket
    made = [0]

    def connect_after_the_close(endpoint: CoreEndpoint, timeout_s: float) -> socket.socket:
        sock = connect(endpoint, timeout_s)
        made[0] += 1
        if made[0] <= closes:  # the Core will close this one: wait for its EOF
            readable, _, _ = select.select([sock], [], [], 30)
            assert readable, "the dev Core did not close the connection"
        return sock

    monkeypatch.setattr(gateway, "connect_socket", connect_after_the_close)
    try:
        yield rig
    finally:
        rig.close()


@pytest.mark.parametrize("closing_core", [1], indirect=True)
def test_one_closed_connection_is_retried_and_the_request_sent_once(closing_core: Rig) -> None:
    rig = closing_core
    response = rig.gateway.request(Attempt(), dict(ENVELOPE), 5000)
    assert response["ok"] is True
    assert len(rig.core.requests("send_text")) == 1
    assert rig.core.connection_count == 2
    assert not rig.marker.exists()


@pytest.mark.parametrize("closing_core", [2], indirect=True)
def test_a_core_that_closes_twice_is_answered_at_connect_core_without_a_launch(
    closing_core: Rig,
) -> None:
    rig = closing_core
    with pytest.raises(HostError) as caught:
        rig.gateway.request(Attempt(), dict(ENVELOPE), 5000)
    error = caught.value.to_error()
    assert error["code"] == errors.IPC_UNAVAILABLE
    assert error["message"] == errors.MSG_CORE_CLOSED_UNUSED
    assert error["details"]["stage"] == errors.STAGE_CONNECT_CORE
    assert error["details"]["endpoint"] == rig.core.endpoint
    assert "closed before the host could check" in error["details"]["error"]
    assert rig.core.requests() == []
    assert rig.core.connection_count == 2
    assert not rig.marker.exists()
    # The Core recovers: the next request goes through on the first connection.
    assert rig.gateway.request(Attempt(), dict(ENVELOPE), 5000)["ok"] is True
