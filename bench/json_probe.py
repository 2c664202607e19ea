"""Run inside a throwaway venv by bench/json_libs.py: what one relayed event costs with the
stdlib codec the host uses, with orjson and with msgspec, and how each treats the inputs
the host's one JSON rule refuses (native_host/codec.py). Prints one JSON object.

The relay's work per event is modelled as: decode the Core line, wrap the event in
`{"type": "thread_event", "event": ...}` and encode that frame body (compact, non-ASCII
literal). Needs no native_host: the stdlib codec is rebuilt here with the host's options.
"""

from __future__ import annotations

import importlib
import json
import sys
import timeit
from collections.abc import Callable
from typing import Any

SIZES = {"200 B": 200, "512 KiB": 512 * 1024}
TEXTS = {"ascii": "x", "mixed": "Grüße, 世界 🙂 and some plain words. "}
"""Event text: all ASCII, or a mix with 2-, 3- and 4-byte UTF-8 characters."""
REFUSED = {
    "NaN": b'{"a":NaN}',
    "1e400": b'{"a":1e400}',
    "lone surrogate": b'{"a":"\\ud800"}',
    "invalid UTF-8": b'{"a":"\xff"}',
    "2**70": b'{"a":1180591620717411303424}',
}
"""Inputs and what the host does: it refuses the first four as invalid JSON, accepts 2**70."""


def _parse_float(text: str) -> float:
    value = float(text)
    if value - value != 0:
        raise ValueError("non-finite")
    return value


def _reject(name: str) -> Any:
    raise ValueError(name)


def codecs() -> dict[str, tuple[Callable[[bytes], Any], Callable[[Any], bytes]]]:
    """name -> (decode, encode) for each library importable here."""
    decoder = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject)
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def host_decode(data: bytes) -> Any:
        text = data.decode("utf-8")
        value = decoder.decode(text)
        if "\\ud" in text or "\\uD" in text:  # the host's lone-surrogate check
            encoder.encode(value).encode("utf-8")
        return value

    found: dict[str, tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] = {
        "json (host codec)": (host_decode, lambda v: encoder.encode(v).encode("utf-8")),
    }
    try:
        orjson = importlib.import_module("orjson")
        found["orjson"] = (orjson.loads, orjson.dumps)
    except ImportError:
        pass
    try:
        msgspec_json = importlib.import_module("msgspec.json")
        found["msgspec"] = (msgspec_json.Decoder().decode, msgspec_json.Encoder().encode)
    except ImportError:
        pass
    return found


def line(size: int, text: str) -> bytes:
    """A Core event line of about `size` bytes (UTF-8)."""

    def build(body: str) -> bytes:
        event = {"type": "assistant_delta", "seq": 7, "threadId": "t000001", "text": body}
        return json.dumps({"type": "thread_event", "event": event}, ensure_ascii=False).encode()

    room = size - len(build(""))
    body = (text * (room // len(text.encode()) + 1)).encode()[:room].decode("utf-8", "ignore")
    return build(body)


def costs_us(
    decode: Callable[[bytes], Any], encode: Callable[[Any], bytes], data: bytes
) -> dict[str, float]:
    """Best of 5 repeats, microseconds per event: decode alone, encode alone, and the
    relay's decode + wrap + encode."""
    event = decode(data)["event"]
    steps = {
        "decode": lambda: decode(data),
        "encode": lambda: encode({"type": "thread_event", "event": event}),
        "relay": lambda: encode({"type": "thread_event", "event": decode(data)["event"]}),
    }
    number = max(3, 200_000 // max(1, len(data) // 100))
    return {
        name: min(timeit.repeat(step, number=number, repeat=5)) / number * 1e6
        for name, step in steps.items()
    }


def verdicts(decode: Callable[[bytes], Any]) -> dict[str, str]:
    found = {}
    for name, data in REFUSED.items():
        try:
            value = decode(data)
        except Exception as exc:
            found[name] = f"refused ({type(exc).__name__})"
        else:
            found[name] = f"accepted as {value['a']!r:.30}"
    return found


def main() -> int:
    result: dict[str, Any] = {"python": sys.version.split()[0], "libraries": {}}
    for name, (decode, encode) in codecs().items():
        costs = {
            f"{size_name} {text_name}": costs_us(decode, encode, line(size, text))
            for size_name, size in SIZES.items()
            for text_name, text in TEXTS.items()
        }
        result["libraries"][name] = {"us": costs, "inputs": verdicts(decode)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
