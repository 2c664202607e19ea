"""The codec's nesting limit (codec.MAX_DEPTH): everything it accepts it writes back, and
it refuses one level more as invalid JSON, naming the reason and keeping the document."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from native_host import codec

pytestmark = pytest.mark.unit


def nested(depth: int, inner: Any = None) -> Any:
    """`depth` containers around `inner`, alternating arrays and objects."""
    value: Any = [] if inner is None else [inner]
    for level in range(depth - 1):
        value = {"k": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [1, 2, codec.MAX_DEPTH - 1, codec.MAX_DEPTH])
def test_documents_up_to_the_limit_round_trip(depth: int) -> None:
    data = json.dumps(nested(depth)).encode()
    value = codec.decode(data)
    assert codec.decode(codec.encode(value)) == json.loads(data)


@pytest.mark.parametrize("depth", [codec.MAX_DEPTH + 1, codec.MAX_DEPTH + 50, 900])
def test_one_level_past_the_limit_is_refused_with_its_document(depth: int) -> None:
    document = {"type": "send_text", "requestId": "r1", "extra": nested(depth - 1)}
    with pytest.raises(codec.NestingTooDeepError) as caught:
        codec.decode(json.dumps(document).encode())
    assert str(caught.value) == f"JSON nesting is deeper than {codec.MAX_DEPTH} levels"
    assert caught.value.document["requestId"] == "r1"


def test_brackets_inside_strings_do_not_count() -> None:
    text = "[" * 5000 + "{" * 5000
    assert codec.decode(json.dumps({"text": text, "list": nested(10)}).encode())["text"] == text


def test_many_shallow_containers_are_not_deep() -> None:
    """A 1 MiB listing of small objects has thousands of brackets and depth 3."""
    listing = {"paths": [{"name": f"f{i}", "tags": [i]} for i in range(20_000)]}
    assert codec.decode(json.dumps(listing).encode()) == listing


def test_what_is_accepted_re_encodes_on_a_thread_with_a_small_stack() -> None:
    """Relay threads are ordinary threads: the encoder must not run out of stack there."""
    value = codec.decode(json.dumps(nested(codec.MAX_DEPTH)).encode())
    results: list[bytes] = []
    previous = threading.stack_size(256 * 1024)
    try:
        worker = threading.Thread(target=lambda: results.append(codec.encode(value)))
        worker.start()
        worker.join()
    finally:
        threading.stack_size(previous)
    assert results and codec.decode(results[0]) == value


def test_a_long_flat_listing_is_decided_by_counting_brackets() -> None:
    """Many items and few brackets: the walk stops early, and the answer is still right."""
    listing = {"paths": [f"src/file{i}.txt" for i in range(40_000)]}
    data = json.dumps(listing).encode()
    assert codec.too_deep(listing, data) is False
    deep_after_many = {"paths": listing["paths"], "deep": nested(codec.MAX_DEPTH)}
    data = json.dumps(deep_after_many).encode()
    assert codec.too_deep(deep_after_many, data) is True
    with pytest.raises(codec.NestingTooDeepError):
        codec.decode(data)


@pytest.mark.parametrize("size", ["shortest", "short", "long"])
def test_the_shortcuts_by_size_keep_the_limit_exact(size: str) -> None:
    """The shortest text one level too deep (400 bytes), a short one (counted, not
    walked) and a long one are refused; the same texts one level shallower, and short
    texts with more brackets than the limit side by side, are not."""
    pad = {"shortest": 0, "short": 1000, "long": 10_000}[size]
    for depth, refused in ((codec.MAX_DEPTH + 1, True), (codec.MAX_DEPTH, False)):
        data = ("[" * depth + json.dumps("x" * pad) * bool(pad) + "]" * depth).encode()
        band = {"shortest": len(data) <= 400, "short": 400 < len(data) <= 2048}
        assert band.get(size, len(data) > 2048), (size, len(data))
        assert codec.too_deep(json.loads(data), data) is refused, (size, depth, len(data))
    siblings = ("[" + ",".join(["[]"] * (codec.MAX_DEPTH + 50)) + "]").encode()
    assert len(siblings) <= 2048
    assert codec.too_deep(json.loads(siblings), siblings) is False
