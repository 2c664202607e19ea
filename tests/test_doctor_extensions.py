"""`doctor`'s extension checks through the real `pedelec-native-host doctor` process, on
user data dirs written in the shape Debian's Chromium 156 writes (tests/support/profiles.py;
tests/e2e/test_doctor_profiles.py does the same on profiles a real Chromium made).

Then every file doctor reads there, attacked: planted by another local user (a symbolic
link to their file, a file they own, one others may write), huge, truncated, not JSON, a
directory, a FIFO, missing, unreadable; thousands of profiles and extensions. doctor never
crashes, says what it could not read in one line, stays bounded, and writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PureWindowsPath
from typing import Any

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.install import doctor as doc
from native_host.install.locations import RegistryKey
from tests.support import profiles
from tests.support.markers import needs_os
from tests.support.registry import FakePolicyRegistry, FakeRegistry
from tests.support.users import (
    LocalUser,
    python_for_everyone,
    skip_unless_root,
    throwaway_users,
)

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "profiles"
DEV_ID = "kbkiopeinddijhonphlcmogbngjhaeac"
"""The id Chromium gave the real Pedelec 0.4.6 loaded unpacked (issue 25)."""
OTHER_ID = "abcdefghijklmnopabcdefghijklmnop"
FORBIDDEN = '"Access to the specified native messaging host is forbidden."'
EXTENSION_CHECKS = ("profiles", "extension", "extension copies", "profile files")


def doctor(env: dict[str, str], *args: str, timeout: float = 60) -> list[dict[str, str]]:
    """`pedelec-native-host doctor --json ...` as a user runs it; no traceback allowed."""
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", "--json", "--timeout", "5", *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    findings: list[dict[str, str]] = json.loads(result.stdout)["findings"]
    return findings


def extension_side(findings: list[dict[str, str]]) -> list[dict[str, str]]:
    return [f for f in findings if f["check"] in EXTENSION_CHECKS]


def checked(findings: list[dict[str, str]], check: str) -> list[dict[str, str]]:
    return [f for f in findings if f["check"] == check]


def register(user_data_dir: Path, env: dict[str, str], *ids: str) -> None:
    """A manifest allowing the official extension and `ids` (its host does not exist, so no
    self-test runs), and a config.json allowing `ids`, as `install --extension-id` writes."""
    origins = [f"chrome-extension://{i}/" for i in (OFFICIAL_EXTENSION_ID, *ids)]
    manifest = {"name": HOST_NAME, "description": "Pedelec", "path": "/nonexistent/host",
                "type": "stdio", "allowed_origins": origins}  # fmt: skip
    path = user_data_dir / "NativeMessagingHosts" / f"{HOST_NAME}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    config = Path(env["PEDELEC_NATIVE_HOST_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.json").write_text(json.dumps({"allowedExtensionIds": list(ids)}))


@pytest.fixture
def user_data(tmp_path: Path) -> Path:
    return tmp_path / "user-data"


# --- what doctor says about each profile ------------------------------------------------
def test_doctor_names_the_profile_that_has_the_extension(
    user_data: Path, env: dict[str, str]
) -> None:
    profiles.write_user_data(
        user_data,
        {"Default": {}, "Profile 1": {OFFICIAL_EXTENSION_ID: profiles.store_entry()}},
        {"Default": "Personal", "Profile 1": "Work"},
    )
    findings = doctor(env, "--user-data-dir", str(user_data))
    (listed,) = checked(findings, "profiles")
    assert listed["status"] == "ok"
    assert listed["detail"] == '2 in Local State: Default ("Personal"), Profile 1 ("Work")'
    (line,) = checked(findings, "extension")
    assert (line["status"], line["subject"]) == ("ok", "profile user-data")
    assert line["detail"] == (
        f'profile Profile 1 ("Work"): Pedelec 0.4.6 {OFFICIAL_EXTENSION_ID} '
        "(Chrome Web Store), enabled"
    )


def test_an_unpacked_copy_the_manifest_does_not_allow_fails_until_its_fix_is_run(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    """The issue's case: a self-built copy under another id, every host line ok, and
    Chrome refusing connectNative. The fix doctor prints is the one that works."""
    source = profiles.extension_folder(tmp_path / "pedelec-extension", "Pedelec")
    profiles.write_user_data(user_data, {"Default": {DEV_ID: profiles.unpacked_entry(source)}})
    register(user_data, env)
    (line,) = checked(doctor(env, "--user-data-dir", str(user_data)), "extension")
    assert line["status"] == "fail"
    assert line["detail"] == (
        f'profile Default ("Person 1"): Pedelec 1.0 {DEV_ID} (unpacked from {source}), '
        "enabled, but allowed_origins does not list it"
    )
    assert line["symptom"] == FORBIDDEN
    command = f"pedelec-native-host install --user-data-dir {user_data} --extension-id {DEV_ID}"
    assert line["hint"] == f"run `{command}`"

    # the command as printed (--force: this suite runs from a checkout, see test_install)
    fix = [sys.executable, "-m", "native_host", *command.split()[1:], "--force"]
    done = subprocess.run(fix, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    (line,) = checked(doctor(env, "--user-data-dir", str(user_data)), "extension")
    assert line["status"] == "ok"
    assert line["detail"].endswith("enabled; allowed_origins and config.json allow it")


def test_an_id_the_manifest_lists_but_the_host_refuses_is_named(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    source = profiles.extension_folder(tmp_path / "pedelec-extension")
    profiles.write_user_data(user_data, {"Default": {DEV_ID: profiles.unpacked_entry(source)}})
    register(user_data, env, DEV_ID)
    (Path(env["PEDELEC_NATIVE_HOST_CONFIG_DIR"]) / "config.json").write_text("{}")
    (line,) = checked(doctor(env, "--user-data-dir", str(user_data)), "extension")
    assert line["status"] == "fail"
    assert line["detail"].endswith("config.json does not allow it (allowed_origins does)")
    assert "ORIGIN_NOT_APPROVED" in line["symptom"]
    assert f"--extension-id {DEV_ID}" in line["hint"]


def test_a_disabled_copy_says_why_in_the_browsers_words(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    source = profiles.extension_folder(tmp_path / "pedelec-extension")
    old_format = profiles.unpacked_entry(source)
    old_format["disable_reasons"] = 1 | 1 << 24  # the bitmask older versions wrote
    profiles.write_user_data(
        user_data,
        {"Default": {OFFICIAL_EXTENSION_ID: profiles.store_entry(reasons=[2]), DEV_ID: old_format}},
    )
    register(user_data, env, DEV_ID)
    lines = checked(doctor(env, "--user-data-dir", str(user_data)), "extension")
    official = next(f for f in lines if OFFICIAL_EXTENSION_ID in f["detail"])
    assert official["status"] == "warn"
    assert official["detail"].endswith(
        "disabled: an update asks for new permissions that were not accepted"
    )
    assert official["hint"] == "accept its new permissions at chrome://extensions in that profile"
    assert official["symptom"] == "it does not run in that profile"
    unpacked = next(f for f in lines if DEV_ID in f["detail"])
    assert unpacked["detail"].endswith(
        "disabled: turned off by the user; an unpacked extension while developer mode is off"
    )
    assert unpacked["hint"] == (
        "turn it on at chrome://extensions in that profile; "
        "turn on Developer mode at chrome://extensions in that profile"
    )


def test_two_copies_enabled_in_one_profile_are_flagged(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    source = profiles.extension_folder(tmp_path / "pedelec-extension")
    entries = {
        OFFICIAL_EXTENSION_ID: profiles.store_entry(),
        DEV_ID: profiles.unpacked_entry(source),
    }
    profiles.write_user_data(user_data, {"Default": entries, "Profile 1": entries})
    register(user_data, env, DEV_ID)
    findings = doctor(env, "--user-data-dir", str(user_data))
    copies = checked(findings, "extension copies")
    assert [f["detail"].split(":")[0] for f in copies] == [
        'profile Default ("Person 1")',
        'profile Profile 1 ("Person 2")',
    ]
    assert all(f["status"] == "warn" for f in copies)
    assert (
        f"2 Pedelec extensions enabled: Pedelec 0.4.6 {OFFICIAL_EXTENSION_ID}"
        in copies[0]["detail"]
    )
    assert DEV_ID in copies[0]["detail"]
    assert (
        copies[0]["hint"] == "keep one: turn the others off at chrome://extensions in that profile"
    )
    assert [f["status"] for f in checked(findings, "extension")] == ["ok"] * 4


def test_no_pedelec_in_any_profile_is_a_warning_naming_the_store_page(
    user_data: Path, env: dict[str, str]
) -> None:
    other = profiles.store_entry(extension_id=OTHER_ID)
    other["manifest"]["name"] = "Some other extension"
    other["active_permissions"] = {"api": ["storage"]}
    other["manifest"]["permissions"] = ["storage"]
    profiles.write_user_data(user_data, {"Default": {OTHER_ID: other}, "Profile 1": {}})
    (line,) = checked(doctor(env, "--user-data-dir", str(user_data)), "extension")
    assert line["status"] == "warn"  # the host is fine; the extension is missing
    assert line["detail"] == (
        'no Pedelec extension in its 2 profiles read: Default ("Person 1"), Profile 1 ("Person 2")'
    )
    store_page = f"https://chromewebstore.google.com/detail/{OFFICIAL_EXTENSION_ID}"
    assert line["hint"] == f"install it from {store_page} in the profile you use"


def test_pedelec_is_recognised_by_what_it_is_not_by_its_name(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    """Named Pedelec but talking to another host: not Pedelec. Named otherwise, with the
    host's name in a bundled chunk its background imports: Pedelec. Naming the host
    without asking for nativeMessaging: not Pedelec."""
    impostor = profiles.extension_folder(
        tmp_path / "impostor", "Pedelec", "chrome.runtime.connectNative('org.example.other');\n"
    )
    bundled = profiles.extension_folder(
        tmp_path / "bundled", "My tools", "import './assets/chunk-4f2a.js';\n"
    )
    (bundled / "assets").mkdir()
    (bundled / "assets" / "chunk-4f2a.js").write_text(f'export const HOST = "{HOST_NAME}";\n')
    quiet = profiles.extension_folder(tmp_path / "quiet", "Pedelec")
    no_permission = profiles.unpacked_entry(quiet)
    no_permission["active_permissions"] = {"api": ["storage"]}
    ids = ["a" * 32, "b" * 32, "c" * 32]
    entries = [profiles.unpacked_entry(impostor), profiles.unpacked_entry(bundled), no_permission]
    profiles.write_user_data(user_data, {"Default": dict(zip(ids, entries, strict=True))})
    (line,) = checked(doctor(env, "--user-data-dir", str(user_data)), "extension")
    assert line["detail"].startswith(f'profile Default ("Person 1"): My tools 1.0 {"b" * 32} ')


# --- files that are not what the browser writes -----------------------------------------
def sparse(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        handle.truncate(size)


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def not_json(path: Path) -> None:
    path.write_bytes(b"\x00\x01 not JSON at all")


def directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def writable(path: Path) -> None:
    path.chmod(0o666)


ODD = {
    "truncated": (truncated, "not JSON"),
    "not JSON": (not_json, "not JSON"),
    "100 MB": (lambda p: sparse(p, 100 * 1_048_576), "is larger than the host ever reads"),
    "a directory": (directory, "is not a regular file"),
    "a FIFO": (fifo, "is not a regular file"),
    "writable by others": (writable, "is writable by other users"),
}


def official_profile(user_data: Path) -> None:
    profiles.write_user_data(
        user_data, {"Default": {OFFICIAL_EXTENSION_ID: profiles.store_entry()}}
    )


@needs_os("linux", "darwin", reason="FIFOs and POSIX modes")
@pytest.mark.parametrize("kind", ODD)
@pytest.mark.parametrize(
    "name", ["Local State", "Default/Preferences", "Default/Secure Preferences"]
)
def test_an_odd_profile_file_is_one_line_and_nothing_is_written(
    user_data: Path, env: dict[str, str], name: str, kind: str
) -> None:
    official_profile(user_data)
    spoil, words = ODD[kind]
    spoil(user_data / name)
    before = profiles.snapshot(user_data)
    started = time.monotonic()
    findings = doctor(env, "--user-data-dir", str(user_data))
    assert time.monotonic() - started < 20
    assert profiles.snapshot(user_data) == before  # not a byte, not a time, not a mode
    problems = [f for f in extension_side(findings) if f["status"] != "ok"]
    named = [f for f in problems if str(user_data / name) in f["detail"]]
    assert len(named) == 1 and words in named[0]["detail"], problems
    official = [f for f in checked(findings, "extension") if OFFICIAL_EXTENSION_ID in f["detail"]]
    if name == "Default/Preferences":  # where Linux keeps the extensions: none found
        assert official == []
    else:  # Local State: the profile directories are looked in instead
        assert [f["status"] for f in official] == ["ok"]


def test_missing_files_are_said_not_fatal(user_data: Path, env: dict[str, str]) -> None:
    official_profile(user_data)
    (user_data / "Local State").unlink()
    findings = doctor(env, "--user-data-dir", str(user_data))
    (listed,) = checked(findings, "profiles")
    assert listed["status"] == "warn"
    assert listed["detail"].startswith(f"{user_data / 'Local State'} does not exist; found 1")
    assert [f["status"] for f in checked(findings, "extension")] == ["ok"]

    for name in ("Preferences", "Secure Preferences"):
        (user_data / "Default" / name).unlink()
    (problem,) = checked(doctor(env, "--user-data-dir", str(user_data)), "profile files")
    assert problem["detail"].endswith("has no Preferences (deleted, or never opened)")

    empty = user_data.parent / "never-used"
    empty.mkdir()
    (listed,) = checked(doctor(env, "--user-data-dir", str(empty)), "profiles")
    assert listed["status"] == "warn" and listed["detail"].startswith(f"none in {empty}")


def test_an_extension_whose_folder_is_gone_is_said(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    gone = tmp_path / "moved-away"
    profiles.write_user_data(user_data, {"Default": {DEV_ID: profiles.unpacked_entry(gone)}})
    findings = doctor(env, "--user-data-dir", str(user_data))
    (problem,) = checked(findings, "profile files")
    assert problem["detail"] == (
        f'profile Default ("Person 1"): doctor cannot tell whether it is Pedelec: {DEV_ID} asks '
        f"for nativeMessaging, but {gone / 'manifest.json'} does not exist"
    )


# --- another local user plants the files ------------------------------------------------
@pytest.fixture
def mallory() -> Iterator[LocalUser]:
    skip_unless_root()
    with throwaway_users() as make_user:
        yield make_user()


def planted_by(user: LocalUser, name: str, document: dict[str, Any]) -> Path:
    """A file `user` owns in their own directory, readable by everybody."""
    path = user.workdir / name
    path.write_text(json.dumps(document))
    os.chown(path, user.uid, user.gid)
    path.chmod(0o644)
    user.workdir.chmod(0o755)
    return path


@needs_os("linux", reason="throwaway users through useradd")
def test_files_planted_by_another_user_are_refused_not_read(
    tmp_path: Path, user_data: Path, env: dict[str, str], mallory: LocalUser
) -> None:
    """A symbolic link to another user's Preferences, a Preferences they own, a Local State
    they link in, and an extension folder whose files they own: each is refused by name,
    and what they hold (a Pedelec entry of theirs) never shows up."""
    theirs = planted_by(
        mallory, "Preferences", {"extensions": {"settings": {OTHER_ID: profiles.store_entry()}}}
    )
    planted_state = planted_by(
        mallory, "Local State", {"profile": {"info_cache": {"Profile 9": {"name": "Mallory"}}}}
    )
    source = profiles.extension_folder(tmp_path / "their-extension", "Pedelec")
    for path in [source, *source.iterdir()]:
        os.chown(path, mallory.uid, mallory.gid)
    profiles.write_user_data(
        user_data,
        {"Default": {}, "Profile 1": {}, "Profile 2": {DEV_ID: profiles.unpacked_entry(source)}},
    )
    (user_data / "Default" / "Preferences").unlink()
    (user_data / "Default" / "Preferences").symlink_to(theirs)
    profile_1 = user_data / "Profile 1" / "Preferences"
    profile_1.write_text(theirs.read_text())
    os.chown(profile_1, mallory.uid, mallory.gid)
    (user_data / "Local State").unlink()
    (user_data / "Local State").symlink_to(planted_state)
    before = profiles.snapshot(user_data)

    findings = doctor(env, "--user-data-dir", str(user_data))
    assert profiles.snapshot(user_data) == before
    text = json.dumps(findings)
    assert OTHER_ID not in text and "Mallory" not in text and "Profile 9" not in text
    (listed,) = checked(findings, "profiles")
    assert f"{user_data / 'Local State'} is a symbolic link" in listed["detail"]
    problems = [f["detail"] for f in checked(findings, "profile files")]
    assert f"{user_data / 'Default' / 'Preferences'} is a symbolic link" in problems[0]
    assert f"{profile_1} belongs to another user" in problems[1]
    assert f"{source / 'manifest.json'} belongs to another user" in problems[2]
    assert DEV_ID in problems[2]
    assert checked(findings, "extension")[0]["detail"].startswith("no Pedelec extension")


# --- a file the user cannot read ------------------------------------------------------------
@pytest.fixture(scope="module")
def package_for_everyone() -> Iterator[tuple[Path, str, dict[str, str]]]:
    """This checkout's package and what doctor imports, where every user can read them
    (the project's interpreter and pytest's temp dirs are private to root), and an
    interpreter of this version they can run it with (`python_for_everyone`), with the
    environment it needs."""
    import annotated_types
    import pydantic
    import pydantic_core
    import typing_extensions
    import typing_inspection

    root = Path(tempfile.mkdtemp(prefix="pedelec-doctor-package-"))
    try:
        modules = [pydantic, pydantic_core, typing_inspection, annotated_types]
        sources = [REPO / "native_host", *(Path(m.__file__ or "").parent for m in modules)]
        for source in sources:
            subprocess.run(["cp", "-r", str(source), str(root)], check=True, timeout=60)
        subprocess.run(["cp", typing_extensions.__file__, str(root)], check=True, timeout=60)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        python, python_env = python_for_everyone(root / "python")
        yield root, python, python_env
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False, timeout=60)


@needs_os("linux", reason="throwaway users through useradd")
def test_a_file_the_user_cannot_read_is_said_not_a_crash(
    package_for_everyone: tuple[Path, str, dict[str, str]], mallory: LocalUser
) -> None:
    """Run as a user who is not root (for root no mode bit locks a file): Local State and
    a Preferences chmod 000, the other profile still read."""
    alice = mallory  # the throwaway user plays the browser's owner here
    user_data = alice.workdir / "user-data"
    profiles.write_user_data(
        user_data,
        {"Default": {}, "Profile 1": {OFFICIAL_EXTENSION_ID: profiles.store_entry()}},
    )
    for path in [user_data, *user_data.rglob("*")]:
        os.chown(path, alice.uid, alice.gid)
    (user_data / "Default" / "Preferences").chmod(0)
    state = {
        f"PEDELEC_NATIVE_HOST_{d}_DIR": str(alice.workdir / d.lower())
        for d in ("STATE", "CONFIG", "LOG")
    }
    package, python, python_env = package_for_everyone
    bootstrap = (
        f"import sys; sys.path.insert(0, {str(package)!r}); "
        "from native_host.cli import main; sys.exit(main())"
    )
    args = ["doctor", "--json", "--user-data-dir", str(user_data)]
    done = alice.run(
        [python, "-I", "-c", bootstrap, *args],
        env=alice.env(PEDELEC_HOME=str(alice.workdir / "pedelec-home"), **state, **python_env),
        check=False,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    findings = json.loads(done.stdout)["findings"]
    (problem,) = checked(findings, "profile files")
    assert problem["detail"] == (
        f'profile Default ("Person 1"): {user_data / "Default" / "Preferences"} cannot be read: '
        "Permission denied"
    )
    (line,) = checked(findings, "extension")
    assert line["detail"].startswith('profile Profile 1 ("Person 2"): Pedelec 0.4.6')

    (user_data / "Local State").chmod(0)
    findings = json.loads(
        alice.run(
            [python, "-I", "-c", bootstrap, *args],
            env=alice.env(PEDELEC_HOME=str(alice.workdir / "pedelec-home"), **state, **python_env),
            check=False,
            timeout=60,
        ).stdout
    )["findings"]
    (listed,) = checked(findings, "profiles")
    assert f"{user_data / 'Local State'} cannot be read: Permission denied" in listed["detail"]
    assert [f["status"] for f in checked(findings, "extension")] == ["ok"]  # found by its folder


# --- thousands ----------------------------------------------------------------------------------
def test_thousands_of_profiles_and_extensions_stay_bounded(
    tmp_path: Path, user_data: Path, env: dict[str, str]
) -> None:
    """5000 profiles listed, 3000 extensions asking for nativeMessaging in each profile
    read (their folders gone), and one extension folder of 6000 scripts: doctor reads a
    bounded part, says how much it left, and its report stays short."""
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    (crowded / "manifest.json").write_text(json.dumps({"name": "Crowded", "version": "1"}))
    for number in range(6000):
        (crowded / f"module-{number}.js").write_text("export {};\n")
    many = {"p" * 32: profiles.unpacked_entry(crowded)}  # the first one looked into
    for n in range(3000):
        extension_id = "".join(chr(ord("a") + int(c, 16)) for c in f"{n:032x}")
        many[extension_id] = profiles.unpacked_entry(tmp_path / f"gone-{n}")
    names = [f"Profile {n}" for n in range(1, 5001)]
    profiles.write_user_data(user_data, dict.fromkeys(names[:40], many))
    state = json.loads((user_data / "Local State").read_text())
    state["profile"]["info_cache"] = {n: {"name": n} for n in names}
    state["profile"]["profiles_order"] = names
    (user_data / "Local State").write_text(json.dumps(state))

    started = time.monotonic()
    findings = doctor(env, "--user-data-dir", str(user_data), timeout=120)
    elapsed = time.monotonic() - started
    assert elapsed < 60, f"{elapsed:.1f} s"
    side = extension_side(findings)
    assert len(side) < 120, len(side)
    (listed,) = checked(findings, "profiles")
    assert listed["detail"].startswith("5000 (32 read, at most 32) in Local State: ")
    assert listed["detail"].endswith("and 24 more")
    problems = [f["detail"] for f in checked(findings, "profile files")]
    assert sum("2985 more extensions asking for nativeMessaging were not looked into" in p
               for p in problems) == 32  # fmt: skip


# --- other systems: their layout is data ------------------------------------------------------
def test_windows_chrome_is_read_from_secure_preferences(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Reconstructed Windows Chrome profiles (never seen from a real browser, see
    tests/fixtures/profiles/README.md), through doctor in-process with a fake registry:
    the entry in Secure Preferences wins over a stale one in Preferences."""
    local = tmp_path / "local"
    shutil.copytree(FIXTURES / "chrome-windows-reconstructed", local / "Google/Chrome/User Data")
    manifest = tmp_path / "manifest.json"
    origins = [f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"]
    manifest.write_text(json.dumps({"name": HOST_NAME, "path": "C:\\nonexistent\\host.exe",
                                    "type": "stdio", "allowed_origins": origins}))  # fmt: skip
    key = RegistryKey("HKCU", rf"Software\Google\Chrome\NativeMessagingHosts\{HOST_NAME}")
    registry = FakeRegistry({key: str(manifest)})
    home = PureWindowsPath(r"C:\Users\ann")
    doctor_ = doc.Doctor(
        "win32", dict(env, LOCALAPPDATA=str(local)), home,
        registry_factory=lambda: registry, policy_registry_factory=FakePolicyRegistry,
    )  # fmt: skip
    findings = extension_side([f.__dict__ for f in doc.diagnose(doctor_, ["chrome"], [])])
    assert [f["subject"] for f in findings] == ["chrome"] * 3
    assert findings[0]["detail"] == '2 in Local State: Default ("Person 1"), Profile 2 ("Work")'
    assert findings[1]["detail"] == (
        f'profile Default ("Person 1"): Pedelec 0.4.6 {OFFICIAL_EXTENSION_ID} '
        "(Chrome Web Store), enabled"
    )
    assert findings[2]["detail"] == (
        f'profile Profile 2 ("Work"): Pedelec 0.4.6 {OFFICIAL_EXTENSION_ID} (Chrome Web Store), '
        "disabled: an update asks for new permissions that were not accepted"
    )


def test_two_profile_roots_of_one_name_are_each_judged_by_their_own_manifest(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """`--user-data-dir a/chrome b/chrome`: b has no manifest, so a's must not allow b's copy."""
    source = profiles.extension_folder(tmp_path / "pedelec-extension")
    roots = [tmp_path / "a" / "chrome", tmp_path / "b" / "chrome"]
    for root in roots:
        profiles.write_user_data(root, {"Default": {DEV_ID: profiles.unpacked_entry(source)}})
    register(roots[0], env, DEV_ID)
    lines = checked(doctor(env, "--user-data-dir", *map(str, roots)), "extension")
    assert [f["status"] for f in lines] == ["ok", "fail"]
    assert f"--user-data-dir {roots[1]} --extension-id {DEV_ID}" in lines[1]["hint"]
