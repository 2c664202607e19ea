"""Reading Core lines (spec 3.2, 7.8): whatever the chunking, the reader returns exactly
the lines that were sent, long ones whole, oversize ones as their exact size."""

from __future__ import annotations

import random
import socket
import threading

import pytest

from native_host.core.lines import MAX_LINE_BYTES, LineReader, OversizeLine

pytestmark = pytest.mark.unit


def random_lines(rng: random.Random) -> list[bytes]:
    lines = []
    for _ in range(rng.randrange(1, 40)):
        roll = rng.random()
        if roll < 0.05:
            lines.append(b"y" * (MAX_LINE_BYTES + rng.randrange(1, 300_000)))  # oversize
        elif roll < 0.2:
            lines.append(b"x" * rng.randrange(60_000, 600_000))  # spans many receives
        else:
            lines.append(bytes(rng.randrange(97, 123) for _ in range(rng.randrange(0, 300))))
    return lines


@pytest.mark.parametrize("seed", range(12))
def test_lines_survive_any_chunking_and_crlf(seed: int) -> None:
    rng = random.Random(seed)
    lines = random_lines(rng)
    endings = [b"\r\n" if rng.random() < 0.3 else b"\n" for _ in lines]
    data = b"".join(line + end for line, end in zip(lines, endings, strict=True))
    ours, theirs = socket.socketpair()

    def feed() -> None:
        sent = 0
        while sent < len(data):
            step = rng.randrange(1, 200_000)
            theirs.sendall(data[sent : sent + step])
            sent += step
        theirs.close()

    feeder = threading.Thread(target=feed)
    feeder.start()
    reader = LineReader(ours)
    received: list[object] = []
    while (line := reader.read_line(skip_oversize=True)) is not None:
        received.append(("oversize", line.size) if isinstance(line, OversizeLine) else line)
    feeder.join()
    ours.close()
    expected = [("oversize", len(x)) if len(x) > MAX_LINE_BYTES else x for x in lines]
    assert received == expected


def test_an_unterminated_last_line_counts() -> None:
    ours, theirs = socket.socketpair()
    theirs.sendall(b'{"a":1}\n{"b":2}')
    theirs.close()
    reader = LineReader(ours)
    assert reader.read_line() == b'{"a":1}'
    assert reader.read_line() == b'{"b":2}'
    assert reader.read_line() is None
