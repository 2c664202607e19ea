"""The parser of what a browser records about its profiles and extensions, on recorded
files: written by Debian's Chromium 156, and reconstructed from Chromium's sources for
other systems and older versions (tests/fixtures/profiles/README.md says which is which).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.install.doctor import extensions
from native_host.install.doctor import profile_prefs as prefs
from native_host.install.locations import Os
from tests.e2e import harness, profiles
from tests.support.markers import needs_os

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profiles"
REAL = FIXTURES / "chromium-156-linux"
RECORDED = json.loads((REAL / "recorded.json").read_text())
WINDOWS = FIXTURES / "chrome-windows-reconstructed"
MACOS = FIXTURES / "edge-macos-reconstructed"
OLD = FIXTURES / "chromium-old-reconstructed"


def document(path: Path) -> dict[str, object]:
    return prefs.parse_document(path.read_bytes())


def records(user_data_dir: Path, profile: str, os_name: Os) -> dict[str, prefs.ExtensionRecord]:
    """A profile's extensions as doctor merges its two files on that system."""
    by_file = []
    for name in prefs.SETTINGS_FILES[os_name]:
        path = user_data_dir / profile / name
        if path.exists():
            by_file.append(prefs.extension_records(document(path)))
    return prefs.merge_records(by_file)


# --- a real profile: Debian's Chromium 156 ----------------------------------------------
def test_the_profiles_local_state_lists_in_the_pickers_order() -> None:
    listed = prefs.profiles_from_local_state(document(REAL / "Local State"))
    assert listed == [
        prefs.ProfileEntry("Default", "Your Chromium"),
        prefs.ProfileEntry("Profile 1", "Person 1"),
    ]
    assert listed[0].label == 'Default ("Your Chromium")'


def test_a_real_profile_records_both_unpacked_extensions_enabled() -> None:
    found = records(REAL, "Default", Os.LINUX)
    # the browser's own PDF viewer (a component) is no extension the user has
    assert set(found) == {harness.EXTENSION_ID, RECORDED["unpacked_copy_id"]}
    copy = found[RECORDED["unpacked_copy_id"]]
    assert (copy.location, copy.path) == (prefs.COMMAND_LINE, RECORDED["unpacked_copy"])
    assert copy.enabled
    assert copy.manifest is None  # not copied for unpacked extensions: it may change on disk
    assert copy.recorded_permissions() == {"nativeMessaging"}
    assert (
        prefs.source(copy, None) == f"unpacked from {RECORDED['unpacked_copy']}, --load-extension"
    )


def test_a_real_profile_records_the_extension_the_user_turned_off() -> None:
    found = records(REAL, "Profile 1", Os.LINUX)
    turned_off = found[harness.EXTENSION_ID]
    assert not turned_off.enabled
    assert [r.words for r in prefs.disable_reasons(turned_off.disable_reasons)] == [
        "turned off by the user"
    ]


def test_a_real_packed_copy_has_its_manifest_and_a_path_inside_the_profile() -> None:
    packed = records(REAL, "Profile 1", Os.LINUX)[RECORDED["packed_copy_id"]]
    assert packed.location == 2 and packed.enabled
    assert packed.manifest is not None
    facts = prefs.manifest_facts(packed.manifest)
    assert (facts.name, facts.version, facts.scripts) == (
        profiles.PACKED_NAME,
        "1.0",
        ("background.js",),
    )
    assert prefs.source(packed, facts) == "installed by another program"
    where = extensions.extension_directory(Path("/u/Profile 1"), packed)
    assert where == Path("/u/Profile 1/Extensions") / RECORDED["packed_copy_id"] / "1.0_0"


def test_on_linux_the_settings_are_in_preferences_not_secure_preferences() -> None:
    secure = document(REAL / "Default" / "Secure Preferences")
    assert prefs.extension_records(secure) == {}
    assert prefs.SETTINGS_FILES[Os.LINUX][0] == prefs.PREFERENCES


# --- other systems and versions (reconstructed, never seen from a real browser) ----------
def test_windows_keeps_the_settings_in_secure_preferences_with_backslashes() -> None:
    listed = prefs.profiles_from_local_state(document(WINDOWS / "Local State"))
    assert [p.label for p in listed] == ['Default ("Person 1")', 'Profile 2 ("Work")']
    official = records(WINDOWS, "Default", Os.WIN32)[OFFICIAL_EXTENSION_ID]
    assert official.enabled and official.from_webstore
    facts = prefs.manifest_facts(official.manifest or {})
    assert prefs.source(official, facts) == "Chrome Web Store"
    where = extensions.extension_directory(Path("/u/Default"), official)
    assert where == Path("/u/Default/Extensions") / OFFICIAL_EXTENSION_ID / "0.4.6_0"


def test_secure_preferences_wins_over_a_stale_copy_in_preferences_on_windows() -> None:
    official = records(WINDOWS, "Profile 2", Os.WIN32)[OFFICIAL_EXTENSION_ID]
    assert prefs.manifest_facts(official.manifest or {}).version == "0.4.6"
    (reason,) = prefs.disable_reasons(official.disable_reasons)
    assert reason.words == "an update asks for new permissions that were not accepted"
    assert reason.fix.format(page="chrome://extensions").startswith("accept its new permissions")


def test_another_store_is_named_by_its_update_url() -> None:
    (copy,) = records(MACOS, "Default", Os.DARWIN).values()
    assert copy.extension_id != OFFICIAL_EXTENSION_ID
    assert prefs.source(copy, prefs.manifest_facts(copy.manifest or {})) == "Microsoft Edge Add-ons"


def test_an_older_chromium_wrote_a_bitmask_and_a_state() -> None:
    found = records(OLD, "Default", Os.LINUX)
    assert "abcdefghijklmnopabcdefghijklmnop" not in found  # state 2: uninstalled by the user
    official = found[OFFICIAL_EXTENSION_ID]
    assert [r.value for r in prefs.disable_reasons(official.disable_reasons)] == [2, 4]
    unpacked = found["kbkiopeinddijhonphlcmogbngjhaeac"]
    assert unpacked.disable_reasons == {prefs.DISABLED_BY_USER}  # state 0 and no reasons
    assert found["bcdefghijklmnopabcdefghijklmnopa"].enabled  # state 1


def test_local_state_without_profiles_order_lists_every_profile() -> None:
    listed = prefs.profiles_from_local_state(document(OLD / "Local State"))
    assert listed == [prefs.ProfileEntry("Default", "Person 1")]


# --- files that are not what a browser writes -------------------------------------------
@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "not JSON"),
        (b'{"extensions": {"settings": {', "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe{}", "not JSON: not UTF-8"),
        (b"[" * 5000 + b"]" * 5000, "not JSON: JSON nesting is deeper"),
    ],
)
def test_a_file_that_is_not_a_json_object_is_refused_with_why(data: bytes, words: str) -> None:
    with pytest.raises(prefs.ProfileFileError, match=words.replace("(", r"\(")):
        prefs.parse_document(data)


def test_a_real_preferences_file_cut_in_half_is_refused() -> None:
    data = (REAL / "Default" / "Preferences").read_bytes()
    with pytest.raises(prefs.ProfileFileError, match="not JSON"):
        prefs.parse_document(data[: len(data) // 2])


def test_odd_entries_are_skipped_not_fatal() -> None:
    odd = {
        "extensions": {
            "settings": {
                "not-an-id": {"location": 1, "path": "x"},
                "abcdefghijklmnopabcdefghijklmnop": "not a dict",
                "bcdefghijklmnopabcdefghijklmnopa": {"location": "1", "path": "x"},
                "cdefghijklmnopabcdefghijklmnopab": {"location": 4},
                "defghijklmnopabcdefghijklmnopabc": {
                    "location": 4, "path": "/x", "disable_reasons": ["1", -2, 1.5, True]
                },
            }
        }
    }  # fmt: skip
    found = prefs.extension_records(odd)
    assert list(found) == ["defghijklmnopabcdefghijklmnopabc"]
    assert found["defghijklmnopabcdefghijklmnopabc"].enabled  # no reason it can read
    assert prefs.extension_records({"extensions": []}) == {}
    assert prefs.extension_records({}) == {}


def test_local_state_names_that_are_not_one_directory_are_skipped() -> None:
    cache = {name: {"name": "x"} for name in ("../../etc", "a/b", "c\\d", "", "..", "Profile 3")}
    listed = prefs.profiles_from_local_state({"profile": {"info_cache": cache}})
    assert [p.directory for p in listed] == ["Profile 3"]


def test_names_and_versions_are_made_safe_to_print() -> None:
    facts = prefs.manifest_facts({"name": "Pedelec\x1b[31m red\n", "version": "1" * 100})
    assert facts.name == "Pedelec?[31m red?"
    assert len(facts.version) == 40 and facts.version.endswith("…")
    assert prefs.manifest_facts({"name": "__MSG_appName__"}).name == ""


def test_every_disable_reason_of_chromium_is_a_distinct_bit_in_words() -> None:
    values = [r.value for r in prefs.DISABLE_REASONS]
    assert len(set(values)) == len(values) == 21
    assert all(v & (v - 1) == 0 and v < 1 << 25 for v in values)
    assert all(r.words and r.fix for r in prefs.DISABLE_REASONS)
    (unknown,) = prefs.disable_reasons([1 << 30])
    assert unknown.words == f"reason {1 << 30} (unknown to this doctor)"


def test_a_script_names_the_host_only_as_a_string() -> None:
    assert prefs.names_host(b'const HOST_NAME = "cc.isaaclin.pedelec";', HOST_NAME)
    assert prefs.names_host(b"connectNative('cc.isaaclin.pedelec')", HOST_NAME)
    assert not prefs.names_host(b'"cc.isaaclin.pedelec.other"', HOST_NAME)
    assert not prefs.names_host(b"// talks to cc.isaaclin.pedelec somehow", HOST_NAME)
    assert prefs.names_host((harness.EXTENSION_DIR / "background.js").read_bytes(), HOST_NAME)


def test_a_path_that_leaves_the_profile_is_not_followed() -> None:
    record = prefs.ExtensionRecord("a" * 32, 1, "../../etc", frozenset(), None, None, False)
    assert extensions.extension_directory(Path("/u/Default"), record) is None
    inside = prefs.ExtensionRecord("a" * 32, 1, "x\\..\\..\\y", frozenset(), None, None, False)
    assert extensions.extension_directory(Path("/u/Default"), inside) is None


@needs_os("linux", "darwin", reason="a drive-letter path is absolute only on Windows")
def test_a_windows_path_recorded_on_posix_is_not_followed() -> None:
    windows = prefs.ExtensionRecord("a" * 32, 1, "C:\\x\\y", frozenset(), None, None, False)
    assert extensions.extension_directory(Path("/u/Default"), windows) is None
