"""Origin rules of spec 7.11: normalisation, the argv extension check, block patterns."""

from __future__ import annotations

import subprocess
import sys

import pytest

from native_host import OFFICIAL_EXTENSION_ID
from native_host.errors import INVALID_ORIGIN, ORIGIN_NOT_APPROVED, STAGE_VALIDATE_ORIGIN
from native_host.extension import (
    check_extension_origin,
    extension_not_allowed_error,
    parse_extension_arg,
)
from native_host.origins import (
    BlockPattern,
    InvalidOriginError,
    invalid_origin_error,
    normalize_origin,
)

pytestmark = pytest.mark.process

LONG_LABEL = "a" * 63
# 3 x 63 + 61 + 3 dots = 253 characters: the longest host allowed.
LONGEST_HOST = ".".join([LONG_LABEL] * 3 + ["b" * 61])

VALID = [
    # spec 7.11 (b) normalisation examples, verbatim
    ("HTTPS://App.Example.com:443", "https://app.example.com"),
    ("http://LOCALHOST:3000", "http://localhost:3000"),
    ("http://127.0.0.1:80", "http://127.0.0.1"),
    ("https://bücher.example", "https://xn--bcher-kva.example"),
    # schemes and default ports
    ("https://app.example.com", "https://app.example.com"),
    ("hTtPs://app.example.com", "https://app.example.com"),
    ("https://app.example.com:8443", "https://app.example.com:8443"),
    ("https://app.example.com:80", "https://app.example.com:80"),
    ("http://localhost:443", "http://localhost:443"),
    ("http://localhost", "http://localhost"),
    ("https://app.example.com:0443", "https://app.example.com"),
    ("https://app.example.com:65535", "https://app.example.com:65535"),
    ("https://app.example.com:1", "https://app.example.com:1"),
    # hosts
    ("https://localhost", "https://localhost"),
    ("https://intranet", "https://intranet"),
    ("https://a-b.c-d.example", "https://a-b.c-d.example"),
    ("https://123.example.com", "https://123.example.com"),
    ("https://example.com1", "https://example.com1"),
    ("https://10.0.0.255", "https://10.0.0.255"),
    ("https://0.0.0.0", "https://0.0.0.0"),
    (f"https://{LONG_LABEL}.com", f"https://{LONG_LABEL}.com"),
    (f"https://{LONGEST_HOST}", f"https://{LONGEST_HOST}"),
    # IPv6: canonical compressed lower case, http only for loopback
    ("http://[::1]", "http://[::1]"),
    ("http://[::1]:5173", "http://[::1]:5173"),
    ("http://[0:0:0:0:0:0:0:1]", "http://[::1]"),
    ("https://[2001:DB8::1]", "https://[2001:db8::1]"),
    ("https://[2001:db8:0:0:1:0:0:1]", "https://[2001:db8::1:0:0:1]"),
    ("https://[2001:0db8:0000:0000:0000:ff00:0042:8329]:443", "https://[2001:db8::ff00:42:8329]"),
    ("https://[::ffff:1.2.3.4]", "https://[::ffff:102:304]"),
    ("https://[1:2:3:4:5:6:7:8]", "https://[1:2:3:4:5:6:7:8]"),
    ("https://[1:0:3:4:5:6:7:8]", "https://[1:0:3:4:5:6:7:8]"),
    # IDNA (UTS #46, non-transitional)
    ("https://BÜCHER.example", "https://xn--bcher-kva.example"),
    ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
    ("https://faß.de", "https://xn--fa-hia.de"),
    ("https://münchen.de:8080", "https://xn--mnchen-3ya.de:8080"),
    ("https://例え.テスト", "https://xn--r8jz45g.xn--zckzah"),
    # unicode tricks are folded to what the browser would use, never kept half-mapped
    ("https://example\uff0ecom", "https://example.com"),  # fullwidth full stop
    ("https://example\u3002com", "https://example.com"),  # ideographic full stop
    ("https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com", "https://example.com"),  # fullwidth
    ("https://ex\u00adample.com", "https://example.com"),  # soft hyphen is mapped away
    ("https://\u0430pple.com", "https://xn--pple-43d.com"),  # Cyrillic a: a different host
    ("http://\uff11\uff12\uff17.0.0.1", "http://127.0.0.1"),  # fullwidth digits
]

INVALID = [
    # spec 7.11 (b) invalid examples, verbatim
    ("http://evil.example.com", "http is only allowed"),
    ("https://app.example.com/path", "path"),
    ("https://app.example.com/", "path"),
    ("https://user@app.example.com", "userinfo"),
    ("https://app.example.com:0", "port"),
    # not a string, empty, opaque
    (None, "string"),
    (42, "string"),
    (["https://app.example.com"], "string"),
    (b"https://app.example.com", "string"),
    ("", "empty"),
    ("null", "null"),
    # schemes
    ("ftp://app.example.com", "scheme"),
    ("file://", "scheme"),
    ("chrome-extension://ogccgaminlphbkeghldidiiimajfdpag", "scheme"),
    ("ws://localhost", "scheme"),
    ("app.example.com", "must start with"),
    ("https:app.example.com", "must start with"),
    ("https:/app.example.com", "must start with"),
    ("//app.example.com", "must start with"),
    ("https\u212a://app.example.com", "must start with"),  # Kelvin sign lower-cases to k
    ("http://localhost.example.com", "http is only allowed"),
    ("http://127.0.0.2", "http is only allowed"),
    ("http://[::2]", "http is only allowed"),
    ("http://0.0.0.0", "http is only allowed"),
    # nothing after the authority
    ("https://app.example.com?x=1", "query"),
    ("https://app.example.com#top", "fragment"),
    ("https://app.example.com:443/", "path"),
    ("https://:pw@app.example.com", "userinfo"),
    ("https://app.example.com@evil.example", "userinfo"),
    ("https://app.example.com\\evil.example", "backslash"),
    ("https://app.example.com ", "whitespace"),
    (" https://app.example.com", "scheme"),
    ("https://app .example.com", "whitespace"),
    ("https://app.example.com\n", "whitespace"),
    ("https://app.example.com\x00", "control"),
    ("https://app.example.com\x7f", "control"),
    ("https://app\u00a0example.com", "whitespace"),
    ("https://app.example.com\u3000", "whitespace"),
    # ports
    ("https://app.example.com:", "port"),
    ("https://app.example.com:65536", "port"),
    ("https://app.example.com:123456", "port"),
    ("https://app.example.com:-1", "port"),
    ("https://app.example.com:+443", "port"),
    ("https://app.example.com:44 3", "whitespace"),
    ("https://app.example.com:\uff14\uff14\uff13", "port"),  # fullwidth digits
    ("https://app.example.com:443:443", "port"),
    ("https://app.example.com:0x1bb", "port"),
    # IPv6
    ("https://::1", "empty"),
    ("https://[::1", "unterminated"),
    ("https://[::1]x", "after the IPv6"),
    ("https://[::g]", "IPv6"),
    ("https://[]", "IPv6"),
    ("https://[fe80::1%25eth0]", "zone"),
    ("https://[1.2.3.4]", "IPv6"),
    # IPv4 and numeric last labels
    ("https://256.0.0.1", "dotted-quad"),
    ("https://1.2.3.04", "dotted-quad"),
    ("https://01.2.3.4", "dotted-quad"),
    ("https://127.1", "dotted-quad"),
    ("https://1.2.3.4.5", "dotted-quad"),
    ("https://2130706433", "dotted-quad"),
    ("https://0x7f.0.0.1", "dotted-quad"),
    ("https://example.0x7f", "dotted-quad"),
    ("https://example.123", "dotted-quad"),
    # domain labels
    ("https://", "empty"),
    ("https://:443", "empty"),
    ("https://app.example.com.", "trailing dot"),
    ("https://app..example.com", "empty label"),
    ("https://.example.com", "empty label"),
    ("https://-app.example.com", "a-z"),
    ("https://app-.example.com", "a-z"),
    ("https://app_1.example.com", "a-z"),
    ("https://app%2eexample.com", "a-z"),
    ("https://app*.example.com", "a-z"),
    (f"https://{LONG_LABEL}a.com", "63"),
    (f"https://{LONGEST_HOST}c", "253"),
    ("https://" + "a." * 2000 + "com", "too long"),
    # IDNA failures and tricks that do not survive mapping
    ("https://xn--zz.example", "internationalised"),
    ("https://xn--.example", "internationalised"),
    ("https://example.com\uff0e", "trailing dot"),  # fullwidth dot at the end
    ("https://a\u2488.com", "internationalised"),  # "1." ligature is disallowed
    ("https://\u0000.com", "control"),
    ("https://bad\ufffdname.com", "internationalised"),
    ("https://exa\u200fmple.com", "internationalised"),  # right-to-left mark
]


@pytest.mark.parametrize(("value", "expected"), VALID)
def test_valid_origins_are_normalised(value: str, expected: str) -> None:
    assert normalize_origin(value) == expected


@pytest.mark.parametrize(("value", "expected"), VALID)
def test_normalisation_is_idempotent(value: str, expected: str) -> None:
    assert normalize_origin(expected) == expected


@pytest.mark.parametrize(("value", "reason_part"), INVALID)
def test_invalid_origins_say_why(value: object, reason_part: str) -> None:
    with pytest.raises(InvalidOriginError) as caught:
        normalize_origin(value)
    assert reason_part in caught.value.reason
    assert isinstance(caught.value, ValueError)


def test_invalid_origin_error_shape() -> None:
    error = invalid_origin_error("http://evil.example.com", "http is only allowed ...")
    assert error.to_error() == {
        "code": INVALID_ORIGIN,
        "message": "invalid caller origin",
        "details": {
            "stage": STAGE_VALIDATE_ORIGIN,
            "callerOrigin": "http://evil.example.com",
            "reason": "http is only allowed ...",
        },
    }
    assert "callerOrigin" not in invalid_origin_error(None, "origin must be a string").details


def test_module_import_is_stdlib_only() -> None:
    """The host starts per page load: no pydantic or idna unless a host needs IDNA."""
    code = (
        "import sys; from native_host.origins import normalize_origin as n;"
        "n('https://app.example.com'); n('http://[::1]');"
        "assert 'pydantic' not in sys.modules and 'idna' not in sys.modules, 'eager import';"
        "n('https://bücher.example'); assert 'idna' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- argv extension check (7.11 a) ---------------------------------------------------

OTHER_ID = "abcdefghijklmnopabcdefghijklmnop"
OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([OFFICIAL], OFFICIAL),
        ([OFFICIAL, "--parent-window=0"], OFFICIAL),
        (["--parent-window=0", OFFICIAL], OFFICIAL),
        (
            ["--native-messaging-connect-id=x", "chrome-extension://a/", OFFICIAL],
            "chrome-extension://a/",
        ),
        ([], None),
        (["--parent-window=0"], None),
        (["Chrome-Extension://" + OFFICIAL_EXTENSION_ID + "/"], None),
    ],
)
def test_parse_extension_arg(argv: list[str], expected: str | None) -> None:
    assert parse_extension_arg(argv) == expected


@pytest.mark.parametrize(
    ("arg", "allowed", "ok"),
    [
        (OFFICIAL, [], True),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID}", [], True),
        (f"chrome-extension://{OTHER_ID}/", [], False),
        (f"chrome-extension://{OTHER_ID}/", [OTHER_ID], True),
        (f"chrome-extension://{OTHER_ID}", [OTHER_ID], True),
        (f"chrome-extension://{'a' * 32}/", [], False),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID}//", [], False),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID}/x", [], False),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID}/\n", [], False),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID.upper()}/", [], False),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID[:-1]}/", [], False),
        (f"chrome-extension://{OFFICIAL_EXTENSION_ID}a/", [], False),
        ("chrome-extension://qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq/", ["q" * 32], False),
        ("chrome-extension://*/", ["*"], False),
    ],
)
def test_check_extension_origin(arg: str, allowed: list[str], ok: bool) -> None:
    assert check_extension_origin(arg, allowed) is ok


def test_extension_refusal_frame_error() -> None:
    arg = f"chrome-extension://{'a' * 32}/"
    assert extension_not_allowed_error(arg).to_error() == {
        "code": ORIGIN_NOT_APPROVED,
        "message": "calling extension is not allowed",
        "details": {
            "stage": STAGE_VALIDATE_ORIGIN,
            "reason": "extension_not_allowed",
            "extensionOrigin": arg,
        },
    }


# --- block patterns (7.11 c) -----------------------------------------------------------

MATCHES = [
    # spec example: the apex is not matched
    ("https://*.example.com", "https://app.example.com", True),
    ("https://*.example.com", "https://example.com", False),
    ("https://*.example.com", "https://a.b.example.com", True),
    ("https://*.example.com", "https://app.example.com:8443", True),
    ("https://*.example.com", "http://localhost", False),
    ("https://*.example.com", "https://notexample.com", False),
    ("https://*.example.com", "https://app.example.com.evil", False),
    ("https://*.example.com", "https://appexample.com", False),
    ("HTTPS://*.Example.COM", "https://app.example.com", True),
    ("https://*.example.com:8443", "https://app.example.com:8443", True),
    ("https://*.example.com:8443", "https://app.example.com", False),
    ("https://*.example.com:443", "https://app.example.com", True),
    ("https://*.example.com:443", "https://app.example.com:8443", False),
    ("http://*.localhost", "http://localhost", False),
    ("https://*.bücher.example", "https://shop.xn--bcher-kva.example", True),
    # exact origins, normalised on load
    ("https://evil.example.com", "https://evil.example.com", True),
    ("HTTPS://Evil.Example.com:443", "https://evil.example.com", True),
    ("https://evil.example.com", "https://evil.example.com:8443", False),
    ("https://evil.example.com", "https://sub.evil.example.com", False),
    ("http://localhost:3000", "http://localhost:3000", True),
    ("http://localhost:3000", "http://localhost", False),
    ("https://[::1]", "https://[::1]", True),
]


@pytest.mark.parametrize(("entry", "origin", "matches"), MATCHES)
def test_block_pattern_matching(entry: str, origin: str, matches: bool) -> None:
    assert BlockPattern.parse(entry).matches(origin) is matches


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ("HTTPS://*.Example.COM", "https://*.example.com"),
        ("https://*.example.com:443", "https://*.example.com:443"),
        ("https://Evil.Example.com:443", "https://evil.example.com"),
        ("https://*.bücher.example", "https://*.xn--bcher-kva.example"),
    ],
)
def test_block_pattern_text_is_normalised(entry: str, text: str) -> None:
    assert BlockPattern.parse(entry).text == text


@pytest.mark.parametrize(
    "entry",
    [
        "*",
        "*.example.com",
        "https://*",
        "https://*.",
        "https://*.*.example.com",
        "https://a.*.example.com",
        "https://*example.com",
        "https://*.example.com/",
        "https://*.example.com:0",
        "https://*.1.2.3.4",
        "https://*.[::1]",
        "ftp://*.example.com",
        "https://evil.example.com/",
        "http://evil.example.com",
        "",
        "null",
        42,
    ],
)
def test_invalid_block_entries(entry: object) -> None:
    with pytest.raises(InvalidOriginError):
        BlockPattern.parse(entry)
