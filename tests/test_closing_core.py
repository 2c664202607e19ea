"""Through the real host, with an app-launch.json present: a Core that accepts every
connection and closes it unread never causes a launch, whichever comes first, the
Core's close or the host's write (tests/test_core_closes_unused.py forces the first)."""

from __future__ import annotations

import json

import pytest

from tests.support.world import HostWorld

pytestmark = pytest.mark.process

OK_SEND = {"send_text": {"ok": True, "result": {"threadId": "t000001"}}}
CLOSED_UNUSED = ("IPC_UNAVAILABLE", "Core closed the connection before the request was sent")
"""The Core closed before the host wrote: retried once, then this at connect_core."""
WRITTEN_THEN_CLOSED = ("CORE_RUNTIME_UNAVAILABLE", "pedelec-app is not running")
"""The host wrote into the queued connection first: never re-sent (spec 7.5)."""


def test_a_core_that_closes_every_connection_unread_never_causes_a_launch(
    world: HostWorld,
) -> None:
    core = world.start_core("legacy", close_on_accept=10_000, canned_responses=OK_SEND)
    marker = world.root / "launched"
    app = world.root / "app"
    app.write_text(f"#!/bin/sh\ntouch {marker}\n")
    app.chmod(0o755)
    config = {"version": 1, "executablePath": str(app), "backgroundArgs": ["--background"]}
    (world.home / "app-launch.json").write_text(json.dumps(config))
    host = world.start_host()
    count = 18
    for index in range(count):
        host.send({"type": "send_text", "requestId": f"r{index}", "threadId": "t1", "message": "x"})
    replies = [host.read(timeout=60) for _ in range(count)]
    assert sorted(r["requestId"] for r in replies) == sorted(f"r{i}" for i in range(count))
    for reply in replies:
        error = reply["error"]
        stage = error["details"]["stage"]
        if (error["code"], error["message"]) == CLOSED_UNUSED:
            assert stage == "connect_core", reply
        else:
            assert (error["code"], error["message"]) == WRITTEN_THEN_CLOSED, reply
            assert stage in ("send_request", "await_core_response"), reply
    assert not marker.exists()
    assert "launching the desktop app" not in world.log_text()
    assert core.requests() == []

    core.faults = core.faults.model_copy(update={"close_on_accept": 0})
    after = {"type": "send_text", "requestId": "after", "threadId": "t1", "message": "x"}
    assert host.request(after, timeout=30)["ok"] is True
