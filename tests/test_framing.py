"""Pure tests of the native framing (spec 1.2, 7.6, 7.7)."""

from __future__ import annotations

import io
import json
import os
import struct
import threading

import pytest

from native_host.codec import encode as encode_message
from native_host.framing import (
    MAX_FRAME_BYTES,
    FrameTooLargeError,
    FrameWriter,
    OversizeFrame,
    read_frame,
    recover_request_id,
)

pytestmark = pytest.mark.process


def frame(body: bytes, declared: int | None = None) -> bytes:
    return struct.pack("<I", len(body) if declared is None else declared) + body


def test_reads_consecutive_frames_little_endian() -> None:
    stream = io.BytesIO(frame(b'{"a":1}') + frame(b"[]"))
    assert read_frame(stream) == b'{"a":1}'
    assert read_frame(stream) == b"[]"
    assert read_frame(stream) is None


@pytest.mark.parametrize("data", [b"", b"\x05", b"\x05\x00\x00", frame(b"abc", declared=10)])
def test_eof_in_prefix_or_body_ends_reading(data: bytes) -> None:
    assert read_frame(io.BytesIO(data)) is None


def test_empty_body_is_returned_for_the_parser_to_reject() -> None:
    assert read_frame(io.BytesIO(frame(b""))) == b""


def test_exactly_one_mebibyte_is_accepted() -> None:
    body = b"x" * MAX_FRAME_BYTES
    assert read_frame(io.BytesIO(frame(body))) == body


def test_oversize_frame_is_drained_and_the_next_frame_is_readable() -> None:
    tail = b'","type":"send_text","requestId":"req_huge"}'
    body = b'{"message":"' + b"x" * (MAX_FRAME_BYTES + 10) + tail
    stream = io.BytesIO(frame(body) + frame(b'{"next":true}'))
    result = read_frame(stream)
    assert isinstance(result, OversizeFrame)
    assert (result.size, result.request_id, result.trusted) == (len(body), "req_huge", True)
    assert read_frame(stream) == b'{"next":true}'


def test_oversize_frame_cut_short_by_eof_is_a_shutdown() -> None:
    assert read_frame(io.BytesIO(frame(b"x" * 100, declared=MAX_FRAME_BYTES + 1))) is None


def test_length_beyond_what_chrome_can_send_is_untrusted_and_not_read() -> None:
    stream = io.BytesIO(frame(b"whatever", declared=67_108_865))
    result = read_frame(stream)
    assert isinstance(result, OversizeFrame)
    assert (result.size, result.request_id, result.trusted) == (67_108_865, "", False)
    assert stream.read() == b"whatever"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b'"requestId":"a","x":1,"requestId":"last"}', "last"),
        (b'"requestId" :  "spaced"', "spaced"),
        (b'"requestId":"esc\\"aped"', 'esc"aped'),
        (b'"requestId":"   "', ""),
        (b'"requestId":12', ""),
        (b'"requestId":"' + b"r" * 257 + b'"', ""),
        (b'"requestId":"' + b"r" * 256 + b'"', "r" * 256),
        (b'xxxxxxxxxxxx"', ""),
        (b'"requestId":"unterminated', ""),
    ],
)
def test_request_id_recovery_takes_the_last_string_value(tail: bytes, expected: str) -> None:
    assert recover_request_id(tail) == expected


def test_encoding_is_compact_with_literal_unicode() -> None:
    assert encode_message({"a": "bücher ✓", "b": [1, 2]}) == '{"a":"bücher ✓","b":[1,2]}'.encode()


def test_encoding_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError):
        encode_message({"x": float("nan")})


def test_writer_writes_whole_frames_and_refuses_oversize() -> None:
    read_fd, write_fd = os.pipe()
    writer = FrameWriter(write_fd)
    response = {"type": "response", "requestId": "r", "ok": True, "result": {}}
    assert writer.write_body(encode_message(response))
    with pytest.raises(FrameTooLargeError):
        writer.write_body(b"x" * (MAX_FRAME_BYTES + 1))
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        body = read_frame(reader)
        assert isinstance(body, bytes)
        assert json.loads(body)["requestId"] == "r"
        assert read_frame(reader) is None


def test_writer_reports_a_closed_browser_once_and_then_drops_frames() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    calls: list[int] = []
    writer = FrameWriter(write_fd, on_broken=lambda: calls.append(1))
    assert not writer.write_body(b'{"a":1}')
    assert not writer.write_body(b'{"a":2}')
    assert calls == [1]
    os.close(write_fd)


def test_lone_surrogate_is_escaped_rather_than_crashing() -> None:
    body = encode_message(json.loads('{"text":"a\\ud800b"}'))
    assert body == b'{"text":"a\\ud800b"}'


def test_claimed_stdout_receives_only_frames() -> None:
    """After claim_stdout, print(), C-level writes to fd 1 and children go to stderr."""
    import subprocess
    import sys

    script = (
        "import os, subprocess, sys\n"
        "from native_host.framing import FrameWriter, claim_stdout\n"
        "fd = claim_stdout()\n"
        "print('stray print')\n"
        "os.write(1, b'stray fd write\\n')\n"
        "subprocess.run([sys.executable, '-c', 'print(\"stray child\")'])\n"
        "FrameWriter(fd).write_body(b'{\"ok\":true}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=30, check=True
    )
    assert done.stdout == b"\x0b\x00\x00\x00" + b'{"ok":true}'
    assert b"stray print" in done.stderr
    assert b"stray fd write" in done.stderr
    assert b"stray child" in done.stderr


def test_writer_writes_a_batch_as_whole_frames_in_order() -> None:
    """Several bodies in one writev still arrive as separate, whole frames, in order,
    even bodies too large for one pipe write (the rest follows the partial write)."""
    read_fd, write_fd = os.pipe()
    writer = FrameWriter(write_fd)
    bodies = [encode_message({"n": i, "pad": "x" * (i * 100_000)}) for i in range(6)]
    received: list[bytes | OversizeFrame | None] = []
    reader = threading.Thread(
        target=lambda: received.extend(read_frame(stream) for _ in range(len(bodies))),
    )
    with os.fdopen(read_fd, "rb") as stream:
        reader.start()
        assert writer.write_bodies(bodies)
        reader.join(10)
    os.close(write_fd)
    assert received == bodies
    with pytest.raises(FrameTooLargeError):
        writer.write_bodies([b"{}", b"x" * (MAX_FRAME_BYTES + 1)])
