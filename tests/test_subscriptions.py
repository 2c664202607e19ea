"""`Subscriptions` in-process against a real dev Core on loopback (spec 7.9, 7.10, 9.3).

Possible because the subscriptions get the gateway and the outbox, not the relay: the
frames they write go down a real pipe and are read back here, exactly as Chrome would.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host.admission import Attempt
from native_host.config import HostConfig
from native_host.devcore import DevCore, DevCoreSettings, Faults
from native_host.framing import FrameWriter
from native_host.gateway import CoreGateway
from native_host.messages import NativeRequest
from native_host.outbox import Outbox
from native_host.subscriptions import Subscriptions

pytestmark = pytest.mark.unit


class Rig:
    """A dev Core, a gateway to it and a subscriptions table writing into a pipe."""

    def __init__(self, root: Path, generation: str, config: HostConfig, **faults: Any) -> None:
        home = root / "home"
        home.mkdir()
        self.core = DevCore(
            DevCoreSettings(home=home, generation=generation, faults=Faults(**faults))
        ).start()
        self.gateway = CoreGateway(config, {"PEDELEC_HOME": str(home)})
        read_fd, write_fd = os.pipe()
        self.frames = os.fdopen(read_fd, "rb")
        self.outbox = Outbox(FrameWriter(write_fd))
        self.subscriptions = Subscriptions(self.gateway, self.outbox)
        self.threads: list[threading.Thread] = []

    def create_thread(self) -> str:
        response = self.gateway.request(
            Attempt(),
            {"requestId": "c", "type": "create_thread", "payload": {"provider": "codex"}},
            5000,
        )
        thread_id: str = response["result"]["threadId"]
        return thread_id

    def subscribe(self, thread_id: str, request_id: str) -> None:
        """Start one subscribe on its own thread, as the relay does."""
        request = NativeRequest(
            request_id,
            "subscribe_thread",
            {"type": "subscribe_thread", "requestId": request_id, "threadId": thread_id},
            False,
        )
        attempt = Attempt()
        thread = threading.Thread(
            target=self.subscriptions.subscribe, args=(request, None, attempt), daemon=True
        )
        thread.start()
        self.threads.append(thread)

    def read(self) -> dict[str, Any]:
        (size,) = struct.unpack("<I", self.frames.read(4))
        message: dict[str, Any] = json.loads(self.frames.read(size))
        return message

    def close(self) -> None:
        self.gateway.stopping.set()
        self.gateway.close_all()
        self.core.stop()
        self.outbox.close()
        self.frames.close()


@pytest.fixture
def rig(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    generation, overrides, faults = getattr(request, "param", ("legacy", {}, {}))
    built = Rig(tmp_path, generation, HostConfig(**overrides), **faults)
    try:
        yield built
    finally:
        built.close()


def test_a_subscribe_is_answered_then_its_events_follow(rig: Rig) -> None:
    thread_id = rig.create_thread()
    rig.subscribe(thread_id, "s1")
    assert rig.read() == {
        "type": "response",
        "requestId": "s1",
        "ok": True,
        "result": {"subscribed": True},
    }
    rig.core.emit_event(thread_id, {"type": "assistant_message", "text": "hello"})
    event = rig.read()["event"]
    assert (event["type"], event["text"], event["threadId"]) == (
        "assistant_message",
        "hello",
        thread_id,
    )


def test_a_legacy_duplicate_is_answered_without_core_traffic(rig: Rig) -> None:
    thread_id = rig.create_thread()
    rig.subscribe(thread_id, "s1")
    rig.read()
    before = len(rig.core.record)
    rig.subscribe(thread_id, "s2")
    assert rig.read()["result"] == {"subscribed": True, "duplicate": True}
    assert len(rig.core.record) == before
    assert len(rig.subscriptions) == 1


@pytest.mark.parametrize("rig", [("current", {}, {})], indirect=True)
def test_a_current_stream_closed_by_the_core_is_reported_once_and_forgotten(rig: Rig) -> None:
    thread_id = rig.create_thread()
    rig.subscribe(thread_id, "s1")
    assert "snapshot" in rig.read()["result"]
    rig.core.close_streams(thread_id)
    closed = rig.read()
    assert closed["type"] == "thread_subscription_closed"
    assert closed["error"]["code"] == "NATIVE_CONNECTION_CLOSED"
    for thread in rig.threads:
        thread.join(5)
    assert len(rig.subscriptions) == 0
    assert len(rig.gateway.registry) == 0


@pytest.mark.parametrize("rig", [("legacy", {"max_subscriptions": 2}, {})], indirect=True)
def test_new_keys_over_the_cap_are_refused_at_once_and_duplicates_still_served(rig: Rig) -> None:
    threads = [rig.create_thread() for _ in range(3)]
    for index, thread_id in enumerate(threads[:2]):
        rig.subscribe(thread_id, f"s{index}")
        assert rig.read()["ok"]
    refused: list[BaseException] = []
    request = NativeRequest(
        "over", "subscribe_thread", {"threadId": threads[2], "requestId": "over"}, False
    )
    try:
        rig.subscriptions.subscribe(request, None, Attempt())
    except Exception as exc:
        refused.append(exc)
    assert [getattr(e, "code", None) for e in refused] == ["HOST_BUSY"]
    assert getattr(refused[0], "details", {})["reason"] == "subscriptions"
    rig.subscribe(threads[0], "dup")
    assert rig.read()["result"]["duplicate"] is True
