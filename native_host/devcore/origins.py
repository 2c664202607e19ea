"""Core's own caller-origin normalisation (spec 3.7), looser than the host's (7.11 b)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import idna

_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_origin(value: str) -> str | None:
    """`scheme://host[:port]` in ASCII lower case, or None when Core would reject the origin.

    http or https with a host, no userinfo, a path of exactly `/` (or none), no query or
    fragment; the default port is dropped.
    """
    if any(ch in value for ch in "?#\\") or value != value.strip():
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or parts.path not in ("", "/"):
        return None
    if parts.username is not None or parts.password is not None or not parts.hostname:
        return None
    host = _ascii_host(parts.hostname, bracketed=parts.netloc.rsplit("@", 1)[-1].startswith("["))
    if host is None:
        return None
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def _ascii_host(hostname: str, *, bracketed: bool) -> str | None:
    if bracketed:
        try:
            return f"[{ipaddress.IPv6Address(hostname).compressed}]"
        except ValueError:
            return None
    try:
        return str(idna.encode(hostname, uts46=True).decode("ascii")).lower()
    except UnicodeError:
        return None
