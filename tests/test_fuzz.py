"""Seeded random input through the real host: every frame gets exactly one answer, none
of them the "internal error" safety net, and the host keeps serving (spec 1.4, 7.12: "a
failure in one request yields an error reply for that request and never ends the
process"). The values include what parses but cannot be relayed (lone surrogates,
numbers beyond a double) and nesting around the limit (codec.MAX_DEPTH) and far past it,
the inputs that once reached the safety net."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from native_host.codec import MAX_DEPTH
from native_host.errors import MSG_INTERNAL
from native_host.messages import HOST_LOCAL_TYPES, RELAY_RULES
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

TYPES = [*RELAY_RULES, *HOST_LOCAL_TYPES, "tool_call", "Ping", "", " ", "x" * 300]
HUGE = "__huge_number__"
"""Written into the body as `1e400` (json.dumps cannot write it)."""
VALUES: list[Any] = [
    *(None, True, 0, -1, 1.5, "", " ", "null", "t000001", [], {}, {"a": [1]}),
    *("\ud800", "x\udfffy", "\ud83d\ude00", HUGE, 10**400, -0.0, 2**64),
]
DEEP = "__deep_{}__"
"""Written into the body as that many nested arrays (json.dumps stops near 1,000)."""
DEPTHS = [MAX_DEPTH - 3, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 990, 5000]
"""Nesting of a value: a frame holding it is one or two levels deeper than the value."""
ORIGINS = ["https://app.example.com", "http://evil.example.com", "HTTPS://A.B", "null", 5, None]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.04:
        return DEEP.format(rng.choice(DEPTHS))
    if depth > 3 or roll < 0.5:
        return rng.choice([*VALUES, rng.randbytes(8).hex(), "\u00e9\u2028\U0001f600"])
    if roll < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["threadId", "message", "x", "requestId"]): random_value(rng, depth + 1)}


def answerable_id(value: Any) -> str | None:
    """Spec 1.4 step 3: a non-blank string requestId is echoed, if it is valid Unicode."""
    if not isinstance(value, dict) or not isinstance(value.get("requestId"), str):
        return None
    request_id: str = value["requestId"]
    if not request_id.strip() or any(0xD800 <= ord(c) <= 0xDFFF for c in request_id):
        return None
    return request_id


def dump(value: Any) -> bytes:
    text = json.dumps(value).replace(f'"{HUGE}"', "1e400")
    for depth in DEPTHS:
        text = text.replace(f'"{DEEP.format(depth)}"', "[" * depth + "]" * depth)
    return text.encode()


def random_body(rng: random.Random, index: int) -> tuple[bytes, str | None]:
    """A frame body and the requestId the answer must carry (None: "" or unknown)."""
    roll = rng.random()
    if roll < 0.15:
        return rng.randbytes(rng.randrange(0, 64)), None
    if roll < 0.3:
        value = random_value(rng)
        return dump(value), answerable_id(value)
    message: dict[str, Any] = {"type": rng.choice(TYPES), "requestId": f"f{index}"}
    for _ in range(rng.randrange(4)):
        message[rng.choice(["threadId", "message", "path", "payload", "skills"])] = random_value(
            rng
        )
    if rng.random() < 0.4:
        message["callerOrigin"] = rng.choice(ORIGINS)
    if message["type"] == "subscribe_thread":
        message["threadId"] = rng.choice(["", " ", 5, None])
    return dump(message), f"f{index}"


def text_depth(body: bytes) -> int:
    """How deep the containers of a JSON text nest (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in body.decode("utf-8", "replace"):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def test_random_frames_each_get_one_answer_and_the_host_survives(world: HostWorld) -> None:
    world.start_core("current")
    host = world.start_host(PEDELEC_CORE_RESPONSE_TIMEOUT_MS="3000")
    rng = random.Random(20261130)
    expected_ids: list[str | None] = []
    too_deep: set[str] = set()
    for index in range(1000):
        body, request_id = random_body(rng, index)
        host.send_body(body)
        expected_ids.append(request_id)
        if request_id is not None and text_depth(body) > MAX_DEPTH:
            too_deep.add(request_id)
    answers = [host.read(timeout=30) for _ in expected_ids]
    assert all(a["type"] == "response" for a in answers), answers
    internal = [a for a in answers if a.get("error", {}).get("message") == MSG_INTERNAL]
    assert internal == []
    known = sorted(a["requestId"] for a in answers if a["requestId"])
    assert known == sorted(i for i in expected_ids if i is not None)
    # Nesting: every frame past the limit is refused where it enters, none at or below it.
    assert len(too_deep) >= 10, "the fuzz must reach past the nesting limit"
    for answer in answers:
        details = answer.get("error", {}).get("details", {})
        refused_deep = f"deeper than {MAX_DEPTH}" in str(details.get("error"))
        if answer["requestId"] in too_deep:
            assert details.get("stage") == "parse_message", answer
        elif answer["requestId"]:
            assert not refused_deep, answer
    assert host.request({"type": "ping", "requestId": "alive"})["ok"]
    assert host.proc.poll() is None
