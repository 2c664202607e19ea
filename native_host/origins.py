"""Origin rules of spec 7.11 b and c: `callerOrigin` normalisation and block patterns
(the argv check of 7.11 a is `extension.py`, which a ping needs and this module not).

Pure functions on strings. The host starts for every burst of page activity, so this
module imports only the standard library; `idna` is loaded for non-ASCII or `xn--` hosts.
"""

from __future__ import annotations

import re

from native_host.errors import (
    INVALID_ORIGIN,
    MSG_INVALID_ORIGIN,
    STAGE_VALIDATE_ORIGIN,
    HostError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs a relay start milliseconds; annotations only
    pass

DEFAULT_PORTS = {"https": 443, "http": 80}
HTTP_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The extension's `externally_connectable` http hosts plus IPv6 loopback."""

MAX_ORIGIN_CHARS = 1024
"""Longer than any valid origin (a 253-character host plus scheme and port), even
allowing for characters IDNA maps to nothing; checked first so IDNA never sees megabytes."""
MAX_HOST_CHARS = 253
MAX_LABEL_CHARS = 63

_LABEL_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_NUMERIC_LABEL_RE = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
"""WHATWG's "ends in a number": such a name is parsed as IPv4, never as a domain."""
_PORT_RE = re.compile(r"[0-9]{1,5}")
_FORBIDDEN_AUTHORITY_CHARS = {
    "/": "a path is not allowed, not even a lone /",
    "?": "a query is not allowed",
    "#": "a fragment is not allowed",
    "@": "userinfo is not allowed",
    "\\": "a backslash is not allowed",
}


class InvalidOriginError(ValueError):
    """A value that is not an acceptable origin; `reason` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def normalize_origin(value: object) -> str:
    """The normalised `scheme://host[:port]` of a tuple origin, or InvalidOriginError."""
    return _format(*_parse(value))


def _format(scheme: str, host: str, port: int | None) -> str:
    if port is None or port == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def _parse(value: object) -> tuple[str, str, int | None]:
    """Scheme, normalised host and explicit port of an origin, checked in spec order."""
    if not isinstance(value, str):
        raise InvalidOriginError("origin must be a string")
    if value == "":
        raise InvalidOriginError("origin is empty")
    if value == "null":
        raise InvalidOriginError("opaque origin 'null' cannot be identified")
    if len(value) > MAX_ORIGIN_CHARS:
        raise InvalidOriginError("origin is too long")
    raw_scheme, sep, authority = value.partition("://")
    if not sep or not raw_scheme.isascii():
        raise InvalidOriginError("origin must start with https:// or http://")
    scheme = raw_scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidOriginError(f"scheme {scheme!r} is not allowed; use https")
    _check_authority_chars(authority)
    raw_host, port_text = _split_authority(authority)
    host = _normalize_host(raw_host)
    if scheme == "http" and host not in HTTP_HOSTS:
        raise InvalidOriginError("http is only allowed for localhost, 127.0.0.1 and [::1]")
    return scheme, host, None if port_text is None else _parse_port(port_text)


def _check_authority_chars(authority: str) -> None:
    for char in authority:
        if char in _FORBIDDEN_AUTHORITY_CHARS:
            raise InvalidOriginError(_FORBIDDEN_AUTHORITY_CHARS[char])
        if char.isspace():
            raise InvalidOriginError("whitespace is not allowed")
        if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F:  # Unicode category Cc
            raise InvalidOriginError("control characters are not allowed")


def _split_authority(authority: str) -> tuple[str, str | None]:
    """The host text (brackets kept) and the port text, if a `:` is present."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise InvalidOriginError("unterminated [ in IPv6 host")
        host, rest = authority[: end + 1], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidOriginError("unexpected characters after the IPv6 host")
        return host, rest[1:] if rest else None
    host, sep, port_text = authority.partition(":")
    return host, port_text if sep else None


def _parse_port(text: str) -> int:
    """A port given as 1-5 ASCII digits with a value of 1-65535."""
    if not _PORT_RE.fullmatch(text):
        raise InvalidOriginError("port must be 1 to 5 digits")
    port = int(text)
    if not 1 <= port <= 65535:
        raise InvalidOriginError("port must be between 1 and 65535")
    return port


def _normalize_host(host: str) -> str:
    """A bracketed IPv6 address, a dotted-quad IPv4 address or a domain, normalised."""
    if not host:
        raise InvalidOriginError("host is empty")
    if host.startswith("[") and host.endswith("]"):
        return f"[{_ipv6(host[1:-1])}]"
    name = _to_ascii(host)
    labels = name.split(".")
    if _NUMERIC_LABEL_RE.fullmatch(labels[-1]):
        _check_ipv4(labels)
        return name
    _check_domain(name, labels)
    return name


def _ipv6(text: str) -> str:
    """RFC 5952 / WHATWG text of an IPv6 address: lower-case hex, first longest zero run
    compressed. Written out because newer Pythons print IPv4-mapped addresses dotted."""
    if "%" in text:
        raise InvalidOriginError("IPv6 zone identifiers are not allowed")
    import ipaddress

    try:
        number = int(ipaddress.IPv6Address(text))
    except ValueError:
        raise InvalidOriginError("invalid IPv6 address") from None
    groups = [(number >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best_start, best_len, start = -1, 1, None
    for i, group in enumerate([*groups, 1]):
        if group == 0 and start is None:
            start = i
        elif group != 0 and start is not None:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = None
    hexes = [f"{group:x}" for group in groups]
    if best_start < 0:
        return ":".join(hexes)
    head, tail = hexes[:best_start], hexes[best_start + best_len :]
    return ":".join(head) + "::" + ":".join(tail)


def _to_ascii(host: str) -> str:
    """IDNA ToASCII (UTS #46, non-transitional) when needed, else plain lower-casing."""
    lowered = host.lower()
    if host.isascii() and not any(label.startswith("xn--") for label in lowered.split(".")):
        return lowered
    import idna

    try:
        encoded: bytes = idna.encode(host, uts46=True, transitional=False)
    except (idna.IDNAError, UnicodeError) as exc:
        raise InvalidOriginError(f"host is not a valid internationalised name: {exc}") from None
    return encoded.decode("ascii").lower()


def _check_ipv4(labels: list[str]) -> None:
    if len(labels) != 4 or not all(_is_octet(label) for label in labels):
        raise InvalidOriginError("a host ending in a number must be a dotted-quad IPv4 address")


def _is_octet(label: str) -> bool:
    return (
        label.isascii()
        and label.isdigit()
        and (label == "0" or not label.startswith("0"))
        and int(label) <= 255
    )


def _check_domain(name: str, labels: list[str]) -> None:
    if len(name) > MAX_HOST_CHARS:
        raise InvalidOriginError(f"host is longer than {MAX_HOST_CHARS} characters")
    for label in labels:
        if not label:
            raise InvalidOriginError("host has an empty label (or a trailing dot)")
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidOriginError(f"host label is longer than {MAX_LABEL_CHARS} characters")
        if not _LABEL_RE.fullmatch(label):
            raise InvalidOriginError(
                "host labels may only use a-z, 0-9 and inner hyphens: " + repr(label)
            )


def invalid_origin_error(value: object, reason: str) -> HostError:
    """The `INVALID_ORIGIN` reply for a bad `callerOrigin` (spec 7.4)."""
    details = {"callerOrigin": value} if isinstance(value, str) else {}
    return HostError(
        INVALID_ORIGIN, MSG_INVALID_ORIGIN, STAGE_VALIDATE_ORIGIN, reason=reason, **details
    )


# --- block list entries (7.11 c) ---------------------------------------------------


class BlockPattern:
    """One `blocked` entry: an exact origin, or `<scheme>://*.<domain>[:<port>]` matching
    every subdomain (not the apex) on the given port, or on any port if none is given.

    `text` is the normalised entry, as `block` stores it; `host` the exact host, or for
    a wildcard the domain without `*.`; `port` for a wildcard the port to match
    (defaults included) or None for any port.
    """

    __slots__ = ("host", "port", "scheme", "text", "wildcard")

    def __init__(self, text: str, scheme: str, host: str, port: int | None, wildcard: bool):
        self.text = text
        self.scheme = scheme
        self.host = host
        self.port = port
        self.wildcard = wildcard

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BlockPattern) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"BlockPattern({self.text!r})"

    @classmethod
    def parse(cls, entry: object) -> BlockPattern:
        """Parse and normalise an entry; InvalidOriginError says why it is unusable."""
        if isinstance(entry, str) and "://*." in entry:
            return cls._parse_wildcard(entry)
        if isinstance(entry, str) and "*" in entry:
            raise InvalidOriginError("a wildcard must be written <scheme>://*.<domain>[:<port>]")
        scheme, host, port = _parse(entry)
        return cls(_format(scheme, host, port), scheme, host, port, wildcard=False)

    @classmethod
    def _parse_wildcard(cls, entry: str) -> BlockPattern:
        raw_scheme, _, rest = entry.partition("://*.")
        scheme = raw_scheme.lower() if raw_scheme.isascii() else raw_scheme
        if scheme not in DEFAULT_PORTS:
            raise InvalidOriginError(f"scheme {raw_scheme!r} is not allowed; use https")
        _check_authority_chars(rest)
        raw_domain, port_text = _split_authority(rest)
        if raw_domain.startswith("["):
            raise InvalidOriginError("a wildcard needs a domain, not an IP address")
        domain = _normalize_host(raw_domain)
        port = None if port_text is None else _parse_port(port_text)
        if _NUMERIC_LABEL_RE.fullmatch(domain.rsplit(".", 1)[-1]):
            raise InvalidOriginError("a wildcard needs a domain, not an IP address")
        text = f"{scheme}://*.{domain}" + ("" if port is None else f":{port}")
        return cls(text, scheme, domain, port, wildcard=True)

    def matches(self, origin: str) -> bool:
        """Whether a normalised origin falls under this entry."""
        if not self.wildcard:
            return origin == self.text
        scheme, sep, authority = origin.partition("://")
        if not sep or scheme != self.scheme:
            return False
        host, port = _split_normalised(authority)
        if self.port is not None and (port or DEFAULT_PORTS[scheme]) != self.port:
            return False
        return host.endswith("." + self.host)


def _split_normalised(authority: str) -> tuple[str, int | None]:
    """Host and port of an already normalised authority (no validation needed)."""
    if authority.startswith("["):
        host, _, rest = authority.partition("]")
        return host + "]", int(rest[1:]) if rest else None
    host, sep, port = authority.partition(":")
    return host, int(port) if sep else None
