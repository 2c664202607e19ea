"""Each admitted request runs on a `_thread` thread of its own (spec 7.1); when the OS
refuses one, that request is answered at once and its place under the caps given back."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
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
        # Every refusal gave its place back: had one leaked, the later pings would have
        # queued behind the few host-local places, and this one would wait out its
        # deadline there; it goes on to the Core (absent here) at once instead.
        monkeypatch.undo()
        relay.handle_body(json.dumps({"type": "ping", "requestId": "after"}).encode())
        reply = read_frame(frames)
        details = reply.get("error", {}).get("details", {})
        assert reply["requestId"] == "after", reply
        assert details.get("stage") != "admit_request" and not details.get("queued"), reply
    finally:
        os.close(frames)
        os.close(written)


def test_a_duplicate_subscribe_never_overtakes_the_one_it_duplicates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The OS may run the second subscribe's thread first; the key is claimed in arrival
    order all the same, so "first" sets it up and is answered before its duplicate."""
    real_start = relay_module._thread.start_new_thread
    held: list[tuple[Callable[..., object], tuple[Any, ...]]] = []

    def second_thread_first(function: Callable[..., object], args: tuple[Any, ...]) -> int:
        held.append((function, args))
        if len(held) == 2:
            done = relay_module._thread.allocate_lock()
            done.acquire()

            def run_second() -> None:
                try:
                    function(*args)
                finally:
                    done.release()

            real_start(run_second, ())
            done.acquire(timeout=2)  # a duplicate waits for "first" and holds the lock
            first_function, first_args = held[0]
            real_start(first_function, first_args)
        return 0

    frames, written = os.pipe()
    try:
        relay = relay_module.Relay(
            HostConfig(), {"HOME": str(tmp_path)}, Outbox(FrameWriter(written))
        )
        monkeypatch.setattr(relay_module._thread, "start_new_thread", second_thread_first)
        for rid in ("first", "second"):
            relay.handle_body(
                json.dumps(
                    {"type": "subscribe_thread", "requestId": rid, "threadId": "t1"}
                ).encode()
            )
        replies = [read_frame(frames), read_frame(frames)]
        assert [r["requestId"] for r in replies] == ["first", "second"], replies
        assert replies[0]["error"] == replies[1]["error"]  # no Core here: one setup error
    finally:
        os.close(frames)
        os.close(written)
