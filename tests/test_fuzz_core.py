"""Seeded random input from the Core's side through the real host: stream lines and
responses whose fields are any JSON (or none), nested around the browser's limit,
oversize, or not JSON at all. The page side has its own fuzz (test_fuzz.py); this one
plays a Core that is broken or hostile, which the host trusts no more than the page.

For every seed: no frame the browser would refuse is written (over 1 MiB or nested
deeper than codec.MAX_DEPTH), no request goes unanswered or is answered "internal
error", the stream goes on to the last event, nothing reaches the log as a traceback,
and the host keeps serving."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from native_host.codec import MAX_DEPTH
from native_host.devcore.server import DevCore
from native_host.errors import MSG_INTERNAL
from native_host.events import INFORMATIONAL_TYPES
from tests.support.host import HostUnderTest
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

DEEP = "__deep_{}__"
"""Written into a line as that many nested arrays (json.dumps stops near 1,000)."""
DEPTHS = [MAX_DEPTH - 4, MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, 5000]
HUGE = "__huge_number__"
"""Written into a line as `1e400`, a number no double holds."""
SURROGATE = "__lone_surrogate__"
"""Written into a line as the escape `\\ud800`, which parses but is no Unicode."""
BIG_TEXT = 1_100_000
"""Longer than a frame: the event holding it is oversize (not the line: that is capped)."""
SCALARS: list[Any] = [None, True, False, 0, -1, 7, 2**70, 1.5, "", " ", "t000001", HUGE]
TYPES: list[Any] = [
    "assistant_message", "status_changed", "tool_call", "error", "made_up_type",
    *sorted(INFORMATIONAL_TYPES), "", "x" * 65, "x" * 5000,
    ["raw_stdout"], {"type": "raw_stdout"}, 5, None, True, SURROGATE,
]  # fmt: skip
"""Never `ended`: it closes the stream (spec 7.10), which the sentinel needs open."""


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.06:
        return DEEP.format(rng.choice(DEPTHS))
    if roll < 0.08:
        return SURROGATE
    if depth > 3 or roll < 0.55:
        return rng.choice([*SCALARS, rng.randbytes(6).hex(), "\u00e9\u2028\U0001f600"])
    if roll < 0.8:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["type", "seq", "text", "threadId", "error", "x"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randrange(3))}


def dump(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False)
    text = text.replace(f'"{HUGE}"', "1e400").replace(f'"{SURROGATE}"', '"\\ud800"')
    for depth in DEPTHS:
        text = text.replace(f'"{DEEP.format(depth)}"', "[" * depth + "]" * depth)
    return text.encode()


def random_line(rng: random.Random, thread_id: str) -> bytes:
    """One line as a broken Core might write it on a stream."""
    roll = rng.random()
    if roll < 0.06:
        return rng.randbytes(rng.randrange(1, 40)).replace(b"\n", b" ")
    if roll < 0.12:
        return dump(random_value(rng))
    event: dict[str, Any] = {}
    if rng.random() < 0.9:
        event["type"] = rng.choice(TYPES)
    if rng.random() < 0.85:
        event["seq"] = rng.choice([rng.randrange(1000), random_value(rng)])
    event["threadId"] = thread_id if rng.random() < 0.8 else random_value(rng)
    for _ in range(rng.randrange(3)):
        event[rng.choice(["text", "error", "args", "result", "status"])] = random_value(rng)
    if rng.random() < 0.04:
        event["text"] = "y" * BIG_TEXT
    envelope = "thread_event" if rng.random() < 0.9 else rng.choice([None, 5, "other", ""])
    return dump({"type": envelope, "event": event})


def subscribed(world: HostWorld, generation: str) -> tuple[DevCore, HostUnderTest, str]:
    """A dev Core of `generation`, the host, and a thread the host is subscribed to."""
    core = world.start_core(generation)
    host = world.start_host()
    created = host.request({"type": "create_thread", "requestId": "c", "provider": "codex"})
    thread_id: str = created["result"]["threadId"]
    assert host.request({"type": "subscribe_thread", "requestId": "s", "threadId": thread_id})["ok"]
    return core, host, thread_id


def play(core: DevCore, thread_id: str, rng: random.Random, count: int) -> dict[str, Any]:
    """`count` random lines on the thread's streams, then one good event: returned, the
    event the page gets last if the stream lived through them."""
    for _ in range(count):
        core.inject_stream_line(thread_id, random_line(rng, thread_id))
    last = {"type": "assistant_message", "seq": 10**6, "threadId": thread_id, "text": "last"}
    core.inject_stream_line(thread_id, json.dumps({"type": "thread_event", "event": last}).encode())
    return last


def assert_nothing_broke(world: HostWorld, host: HostUnderTest) -> None:
    """No frame the browser would refuse (the reader refuses one over 1 MiB or nested
    past codec.MAX_DEPTH, as Chromium does), and no sign in the log of a path that broke."""
    host.check_protocol()
    log = world.log_text()
    for sign in ("Traceback", MSG_INTERNAL, "reader failed"):
        assert sign not in log, log[log.find(sign) - 2000 : log.find(sign) + 500]


@pytest.mark.parametrize("seed", [20261203, 7, 424242])
def test_random_stream_lines_never_break_the_stream_or_the_browsers_frame(
    world: HostWorld, seed: int
) -> None:
    core, host, thread_id = subscribed(world, "legacy")
    last = play(core, thread_id, random.Random(seed), 300)
    host.read_until(lambda f: f.get("event") == last, timeout=60)
    assert_nothing_broke(world, host)
    errors = [f for f in host.history if f.get("event", {}).get("type") == "error"]
    assert errors, "the fuzz must reach the host's own stream errors"
    assert host.request({"type": "ping", "requestId": "alive"})["ok"]
    assert host.proc.poll() is None


def materialize(value: Any) -> Any:
    """`value` with its deep markers as real nested lists, for a Core that answers with
    Python objects (the dev Core's canned responses); the deepest stays a marker."""
    if isinstance(value, str) and value.startswith("__deep_"):
        depth = int(value.removeprefix("__deep_").removesuffix("__"))
        if depth > 900:
            return value
        nested: list[Any] = []
        for _ in range(depth - 1):
            nested = [nested]
        return nested
    if isinstance(value, list):
        return [materialize(v) for v in value]
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    return value


def random_response(rng: random.Random) -> dict[str, Any]:
    """What a broken Core might answer a request with (its requestId stays right: a
    wrong one is spec 7.4's case, answered after the response timeout)."""
    answer: dict[str, Any] = {}
    if rng.random() < 0.9:
        answer["ok"] = rng.choice([True, False, True, None, 1, "true"])
    for key in ("result", "error", "type", "x"):
        if rng.random() < 0.5:
            answer[key] = random_value(rng)
    if rng.random() < 0.3:
        answer["error"] = {
            "code": random_value(rng), "message": random_value(rng), "details": random_value(rng)
        }  # fmt: skip
    return materialize(answer)  # type: ignore[no-any-return]


@pytest.mark.parametrize("generation", ["legacy", "current"])
def test_random_core_responses_each_get_one_answer_the_browser_can_read(
    world: HostWorld, generation: str
) -> None:
    core = world.start_core(generation)
    host = world.start_host()
    rng = random.Random(20261203)
    for index in range(200):
        kind = rng.choice(["list_assets", "subscribe_thread", "send_text", "create_thread"])
        canned = {kind: random_response(rng)}
        core.faults = core.faults.model_copy(update={"canned_responses": canned})
        request_id = f"r{index}"
        request = {"type": kind, "requestId": request_id, "threadId": f"t{index}"}
        if kind == "create_thread":
            request = {"type": kind, "requestId": request_id, "provider": "codex"}
        reply = host.request(request | {"message": "hi"} if kind == "send_text" else request, 30)
        assert reply["type"] == "response" and reply["requestId"] == request_id, reply
        assert isinstance(reply["ok"], bool), reply
        if not reply["ok"]:
            error = reply["error"]
            assert isinstance(error.get("code"), str) and isinstance(error.get("message"), str)
    assert_nothing_broke(world, host)
    assert host.request({"type": "ping", "requestId": "alive"})["ok"]


@pytest.mark.parametrize("seed", range(6))
def test_a_current_stream_relays_until_a_bad_line_closes_it_with_a_reason(
    world: HostWorld, seed: int
) -> None:
    """Spec 9.3: on a current stream the first event the host cannot relay closes it with
    `thread_subscription_closed`, naming why; the events before it arrive, none after."""
    core, host, thread_id = subscribed(world, "current")
    last = play(core, thread_id, random.Random(seed), 40)
    end, _ = host.read_until(
        lambda f: f.get("event") == last or f.get("type") == "thread_subscription_closed",
        timeout=60,
    )
    if end.get("type") == "thread_subscription_closed":
        assert end["threadId"] == thread_id
        assert end["error"]["code"] and end["error"]["details"]["stage"], end
    assert host.request({"type": "ping", "requestId": "alive"})["ok"]
    after = host.history[host.history.index(end) + 1 :]
    assert [f for f in after if f.get("type") != "response"] == []
    assert_nothing_broke(world, host)
