"""The one JSON codec of the host, for frames and Core lines alike (spec 0.3).

One rule for what parses but cannot be relayed faithfully: it is refused where it
enters, as invalid JSON. That covers
- non-finite numbers: `NaN`, `Infinity`, and numbers too large for a double (`1e400`,
  which Python would read as infinity and could not write back);
- lone surrogate escapes (`"\\ud800"`): valid JSON text, but not Unicode, so not UTF-8;
- malformed UTF-8, integers longer than Python converts;
- nesting deeper than MAX_DEPTH containers (`NestingTooDeepError`): past it Chromium's
  JSON reader stops, and Python's encoder could not always write back what it read.
Everything `decode` accepts, `encode` writes back: compact, non-ASCII literal (spec 0.3
rules 6 and 7), and the browser can read it.
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs a relay start milliseconds; annotations only
    from typing import Any


class InvalidJsonError(ValueError):
    """Bytes that are not JSON the host can relay faithfully; the text says why.

    `document` is what the bytes parse to when they are valid JSON syntax that still
    cannot be relayed (a lone surrogate, `1e400`), so the refusal can be answered under
    the message's own requestId; None when they are not JSON at all.
    """

    def __init__(self, reason: str, document: Any = None) -> None:
        super().__init__(reason)
        self.document = document


MAX_DEPTH = 199
"""The deepest nesting of arrays and objects a message may have (`[]` is depth 1).

Chromium's base::JSONReader refuses 200 nested containers (base/json/json_common.h,
kAbsoluteMaxDepth = 200, too deep once the depth reaches it); Chromium 156 itself hands
the extension frames nested at least 500 deep (tests/e2e), so 199 is read by the
strictest reader on the way, and Python re-encodes it on any thread's stack. A frame the
host relays is as deep as the Core line it came from, so refusing deeper Core lines (and
deeper page frames) keeps every frame readable."""


class NestingTooDeepError(InvalidJsonError):
    """Valid JSON whose containers nest deeper than MAX_DEPTH; `document` is what it parsed to."""


def _reject_constant(name: str) -> Any:
    raise InvalidJsonError(f"{name} is not valid JSON (non-finite number)")


class _NumberTooLargeError(InvalidJsonError):
    """A number token that is valid JSON but overflows a double."""


def _parse_float(text: str) -> float:
    value = float(text)
    if value - value != 0:  # inf - inf is nan, and nan != 0
        raise _NumberTooLargeError(f"number {text[:40]} does not fit a double")
    return value


_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject_constant)
_SYNTAX_DECODER = json.JSONDecoder(parse_float=lambda text: 0.0, parse_constant=_reject_constant)
"""Reads any RFC 8259 document, huge numbers included, to recover what a refusal answers."""
_BLANKS = " \t\n\r"
"""JSON's whitespace (RFC 8259): allowed around the document, nothing else is."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""The only way a surrogate gets into a decoded string: a `\\uD800`-`\\uDFFF` escape
(literal surrogates are not UTF-8). Searched in the bytes: several times cheaper than two
`in` tests on the text, which matters for a 512 KiB event (docs/performance.md)."""
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def decode(data: bytes) -> Any:
    """Strict JSON from UTF-8 bytes; `InvalidJsonError` for anything not relayable."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJsonError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    if text[:1] in _BLANKS:
        text = text.lstrip(_BLANKS)
    try:
        value, end = _DECODER.raw_decode(text)  # one call; decode() adds two regex matches
        if end != len(text) and text[end:].strip(_BLANKS):
            raise ValueError(f"Extra data: line 1 column {end + 1} (char {end})")
    except RecursionError:  # deeper than Python parses: the document is not known
        raise NestingTooDeepError(f"JSON nesting is deeper than {MAX_DEPTH} levels") from None
    except _NumberTooLargeError as exc:
        try:
            document = _SYNTAX_DECODER.decode(text)
        except RecursionError:
            raise NestingTooDeepError(f"JSON nesting is deeper than {MAX_DEPTH} levels") from None
        except ValueError:
            document = None
        raise InvalidJsonError(str(exc), document) from None
    except InvalidJsonError:
        raise
    except ValueError as exc:
        raise InvalidJsonError(str(exc)) from None
    if too_deep(value, data):
        raise NestingTooDeepError(f"JSON nesting is deeper than {MAX_DEPTH} levels", value)
    if _SURROGATE_ESCAPE.search(data):  # then check properly: a pair is fine
        _refuse_lone_surrogates(value)
    return value


_SHALLOWEST_TOO_DEEP = 2 * (MAX_DEPTH + 1)
"""The shortest text nesting deeper than MAX_DEPTH (`[[…]]`): anything shorter, a typical
streamed event among them, needs no look at all."""
_COUNT_FIRST_BYTES = 2048
"""Up to this size counting brackets (a few µs) is cheaper than any walk; past it a walk
over a text-heavy message is the cheaper one (docs/performance.md)."""


def _brackets(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{")


def too_deep(value: Any, data: bytes | None = None) -> bool:
    """Whether `value` (decoded from `data`, if given) nests deeper than MAX_DEPTH.

    A text too short to nest that deep, or a short one with few brackets, is settled
    without a walk. Otherwise level by level (no recursion), looking only at what the
    JSON codec makes (exact dicts and lists), stopping at the first empty level: a
    512 KiB text costs microseconds. A walk over many items (a long listing) gets
    dearer than counting brackets in `data`, which bounds the depth from above; past
    one item per 32 bytes the count decides, and only more than MAX_DEPTH brackets
    resume the walk.
    """
    if data is not None:
        if len(data) < _SHALLOWEST_TOO_DEEP:
            return False
        if len(data) <= _COUNT_FIRST_BYTES and _brackets(data) <= MAX_DEPTH:
            return False
    budget = -1 if data is None else len(data) // 32
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(MAX_DEPTH):
        if not level:
            return False
        inner: list[Any] = []
        add = inner.append
        for container in level:
            items = container.values() if type(container) is dict else container
            if budget >= 0:
                budget -= len(items)
                if budget < 0 and data is not None and _brackets(data) <= MAX_DEPTH:
                    return False
            for item in items:
                if type(item) is dict or type(item) is list:
                    add(item)
        level = inner
    return bool(level)


def _refuse_lone_surrogates(value: Any) -> None:
    try:
        _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError as exc:
        point = ord(exc.object[exc.start])
        reason = f"lone surrogate \\u{point:04x} is not valid Unicode"
        raise InvalidJsonError(reason, value) from None


def encode(value: Any) -> bytes:
    """Compact UTF-8 JSON with literal non-ASCII.

    Only host-made text can still hold a lone surrogate (an OS error naming a file whose
    name is not UTF-8); such a message is written with `\\u` escapes instead.
    """
    text = _ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")
