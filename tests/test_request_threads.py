"""Each admitted request runs on a `_thread` thread of its own (spec 7.1); when the OS
refuses one, that request is answered at once and its place under the caps given back."""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import pytest

from native_host import relay as relay_module
from native_host.config import HostConfig
from native_host.framing import FrameWriter
from native_host.outbox import Outbox

pytestmark = pytest.mark.unit


def read_frame(fd: int) -> dict[str, Any]:
    (size,) = struct.unpack("<I", os.read(fd, 4))
    message: dict[str, Any] = json.loads(os.read(fd, size))
    return message


def test_a_request_the_os_gives_no_thread_is_answered_and_releases_its_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames, written = os.pipe()
    try:
        relay = relay_module.Relay(HostConfig(), {}, Outbox(FrameWriter(written)))

        def refuse(*args: object) -> int:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(relay_module._thread, "start_new_thread", refuse)
        for index in range(3 * HostConfig().max_in_flight_requests):
            relay.handle_body(json.dumps({"type": "ping", "requestId": f"p{index}"}).encode())
            reply = read_frame(frames)
            assert (reply["requestId"], reply["ok"]) == (f"p{index}", False)
            assert reply["error"]["code"] == "HOST_RESOURCES_EXHAUSTED"
            assert reply["error"]["details"]["stage"] == "admit_request"
        assert relay.gateway.admission.requests == 0  # never HOST_BUSY: places came back
    finally:
        os.close(frames)
        os.close(written)
