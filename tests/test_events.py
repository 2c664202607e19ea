"""Pure tests of the event size rules (spec 7.7, 7.8)."""

from __future__ import annotations

import json

import pytest

from native_host.codec import encode
from native_host.events import (
    MAX_EVENT_TYPE_CHARS,
    find_event_type,
    fit_event,
    oversize_event_error,
)
from native_host.framing import MAX_FRAME_BYTES

pytestmark = pytest.mark.unit


def test_small_event_is_encoded_unchanged() -> None:
    event = {"type": "assistant_message", "seq": 4, "threadId": "t1", "text": "hi"}
    fitted = fit_event(event)
    assert fitted.body is not None
    assert json.loads(fitted.body) == {"type": "thread_event", "event": event}


def test_informational_event_is_truncated_to_exactly_fit() -> None:
    event = {
        "type": "provider_command_started",
        "seq": 5,
        "threadId": "t1",
        "prompt": "p" * 2_000_000,
    }
    fitted = fit_event(event)
    assert fitted.truncated and fitted.body is not None
    assert len(fitted.body) <= MAX_FRAME_BYTES
    assert len(fitted.body) > MAX_FRAME_BYTES - 8
    decoded = json.loads(fitted.body)["event"]
    assert decoded["truncated"] is True and decoded["seq"] == 5
    assert decoded["prompt"] == "p" * len(decoded["prompt"])


def test_truncation_accounts_for_escaped_and_multibyte_text() -> None:
    event = {"type": "raw_stdout", "seq": 1, "threadId": "t1", "text": '"é\n' * 500_000}
    fitted = fit_event(event)
    assert fitted.body is not None and len(fitted.body) <= MAX_FRAME_BYTES


def test_informational_event_without_a_long_string_is_dropped() -> None:
    event = {"type": "tool_result", "seq": 8, "threadId": "t1", "result": {"blob": "b" * 2_000_000}}
    fitted = fit_event(event)
    assert fitted.body is None and fitted.dropped


def test_visible_event_is_never_truncated() -> None:
    event = {"type": "assistant_message", "seq": 9, "threadId": "t1", "text": "a" * 2_000_000}
    fitted = fit_event(event)
    assert fitted.body is None and not fitted.dropped
    error = oversize_event_error(event, fitted.size)
    assert error["details"] == {
        "stage": "relay_event",
        "eventType": "assistant_message",
        "seq": 9,
        "sizeBytes": fitted.size,
    }


def test_oversize_error_omits_missing_type_and_seq() -> None:
    assert oversize_event_error({"x": 1}, 5)["details"] == {"stage": "relay_event", "sizeBytes": 5}


HUGE = "x" * (MAX_FRAME_BYTES + 10)


@pytest.mark.parametrize(
    ("event", "named"),
    [
        ({"type": HUGE, "seq": 4}, {"seq": 4}),  # the oversize part is the type itself
        ({"type": {"nested": [HUGE]}, "seq": 4}, {"seq": 4}),  # not a type name
        ({"type": ["raw_stdout"], "seq": 4, "pad": HUGE}, {"seq": 4}),  # unhashable
        ({"type": "assistant_message", "seq": [HUGE]}, {"eventType": "assistant_message"}),
        (
            {"type": "assistant_message", "seq": True, "pad": HUGE},
            {"eventType": "assistant_message"},
        ),
        ({"type": "", "seq": 4.5, "pad": HUGE}, {}),
    ],
)
def test_an_oversize_error_fits_a_frame_whatever_the_event_names_itself(
    event: dict[str, object], named: dict[str, object]
) -> None:
    """The error replaces an event that cannot be written: copying the event's own
    oversize `type` or `seq` into it would make the error unwritable too, and a `type`
    that is not a string is not an informational event (nor a crash)."""
    fitted = fit_event(event | {"threadId": "t1"})
    assert fitted.body is None and not fitted.dropped
    error = oversize_event_error(event, fitted.size)
    assert len(encode(error)) < 200
    assert error["details"] == {"stage": "relay_event", "sizeBytes": fitted.size} | named


def test_an_event_type_of_up_to_64_characters_is_named() -> None:
    named = oversize_event_error({"type": "a" * MAX_EVENT_TYPE_CHARS}, 5)["details"]
    assert named["eventType"] == "a" * 64
    assert "eventType" not in oversize_event_error({"type": "a" * 65}, 5)["details"]


def test_event_type_is_found_near_the_end_of_a_sorted_line() -> None:
    tail = b'xxxx","threadId":"t1","type":"assistant_message"},"type":"thread_event"}'
    assert find_event_type(b'{"event":{"seq":1,"text":"xxx', tail) == "assistant_message"


def test_event_type_is_found_in_the_head_when_keys_are_unsorted() -> None:
    head = b'{"type":"thread_event","event":{"type":"tool_call","args":{"a":"'
    assert find_event_type(head, b'aaaa"}}}') == "tool_call"


def test_event_type_may_be_unknown() -> None:
    assert find_event_type(b'{"x":"aaa', b'aaa"}') is None
