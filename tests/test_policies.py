"""Managed browser policies: Chromium's rule as a pure function, the Linux JSON
directories and macOS managed preferences in a simulated file system root, the Windows
policy keys through a fake registry (only Linux runs here), and `doctor`'s findings.
"""

from __future__ import annotations

import json
import platform
import plistlib
import sys
from pathlib import Path, PurePath
from typing import Any

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID, __version__
from native_host.install import doctor as doc
from native_host.install import managed_policy as mp
from native_host.install.locations import Os, RegistryKey
from tests.support.registry import FakePolicyRegistry, FakeRegistry

pytestmark = pytest.mark.process

OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
BLOCKED = '"Access to the native messaging host was disabled by the system administrator."'
NOT_FOUND = '"Specified native messaging host not found."'
MANIFEST = f"{HOST_NAME}.json"


def settings(**values: Any) -> mp.Settings:
    found = mp.Settings()
    for name, value in values.items():
        found.offer(name, value, "test")
    return found


@pytest.mark.parametrize(
    ("values", "permission"),
    [
        ({}, mp.Permission.ALLOW_ALL),
        ({mp.BLOCKLIST: ["*"]}, mp.Permission.DISALLOW),
        ({mp.BLOCKLIST: [HOST_NAME]}, mp.Permission.DISALLOW),
        ({mp.BLOCKLIST: ["com.example.other"]}, mp.Permission.ALLOW_ALL),
        ({mp.BLOCKLIST: ["*"], mp.ALLOWLIST: [HOST_NAME]}, mp.Permission.ALLOW_ALL),
        ({mp.BLOCKLIST: ["*"], mp.ALLOWLIST: ["com.example.other"]}, mp.Permission.DISALLOW),
        ({mp.USER_LEVEL: False}, mp.Permission.SYSTEM_ONLY),
        ({mp.USER_LEVEL: True}, mp.Permission.ALLOW_ALL),
        ({mp.USER_LEVEL: False, mp.BLOCKLIST: ["*"]}, mp.Permission.DISALLOW),
        ({mp.BLOCKLIST: "*"}, mp.Permission.ALLOW_ALL),  # not a list: Chrome ignores it
    ],
)
def test_chromiums_rule(values: dict[str, Any], permission: mp.Permission) -> None:
    assert mp.evaluate(settings(**values)) is permission


def write_json_policy(root: Path, directory: str, name: str, policy: dict[str, Any]) -> Path:
    path = root / directory.lstrip("/") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(policy))
    return path


def test_linux_reads_every_managed_json_file_first_one_wins(tmp_path: Path) -> None:
    managed = "/etc/opt/chrome/policies/managed"
    write_json_policy(tmp_path, managed, "10-block.json", {mp.BLOCKLIST: ["*"], "Other": 1})
    write_json_policy(tmp_path, managed, "20-allow.json", {mp.ALLOWLIST: [HOST_NAME]})
    write_json_policy(tmp_path, managed, "30-late.json", {mp.BLOCKLIST: []})
    (tmp_path / managed.lstrip("/") / "notes.txt").write_text("ignored")
    found = mp.PolicyReader(Os.LINUX, tmp_path).read("chrome")
    assert found is not None
    assert found.values == {mp.BLOCKLIST: ["*"], mp.ALLOWLIST: [HOST_NAME]}
    assert found.origin[mp.BLOCKLIST] == f"{managed}/10-block.json"
    assert mp.evaluate(found) is mp.Permission.ALLOW_ALL
    assert mp.PolicyReader(Os.LINUX, tmp_path).read("chromium") == mp.Settings()
    assert mp.PolicyReader(Os.LINUX, tmp_path).read("vivaldi") is None  # location unknown


def test_linux_reports_a_policy_file_it_cannot_parse(tmp_path: Path) -> None:
    path = tmp_path / "etc/brave/policies/managed/broken.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    found = mp.PolicyReader(Os.LINUX, tmp_path).read("brave")
    assert found is not None and len(found.problems) == 1
    assert "/etc/brave/policies/managed/broken.json" in found.problems[0]


def test_macos_managed_preferences_computer_before_user(tmp_path: Path) -> None:
    prefs = tmp_path / "Library" / "Managed Preferences"
    (prefs / "ann").mkdir(parents=True)
    (prefs / "com.microsoft.Edge.plist").write_bytes(plistlib.dumps({mp.USER_LEVEL: False}))
    (prefs / "ann" / "com.microsoft.Edge.plist").write_bytes(
        plistlib.dumps({mp.USER_LEVEL: True, mp.BLOCKLIST: [HOST_NAME]})
    )
    found = mp.PolicyReader(Os.DARWIN, tmp_path, user="ann").read("edge")
    assert found is not None
    assert found.values == {mp.USER_LEVEL: False, mp.BLOCKLIST: [HOST_NAME]}
    assert found.origin[mp.BLOCKLIST] == "/Library/Managed Preferences/ann/com.microsoft.Edge.plist"
    assert mp.evaluate(found) is mp.Permission.DISALLOW


def test_windows_policy_keys_machine_before_user() -> None:
    chrome = r"SOFTWARE\Policies\Google\Chrome"
    registry = FakePolicyRegistry(
        {
            RegistryKey("HKCU", chrome): {mp.USER_LEVEL: 1},
            RegistryKey("HKLM", chrome): {mp.USER_LEVEL: 0},
            RegistryKey("HKCU", rf"{chrome}\{mp.BLOCKLIST}"): {"2": HOST_NAME, "1": "com.x"},
            RegistryKey("HKLM", rf"{chrome}\{mp.ALLOWLIST}"): {"1": "com.example.other"},
        }
    )
    found = mp.PolicyReader(Os.WIN32, registry_factory=lambda: registry).read("chrome")
    assert found is not None
    assert found.values == {
        mp.USER_LEVEL: False,
        mp.BLOCKLIST: ["com.x", HOST_NAME],
        mp.ALLOWLIST: ["com.example.other"],
    }
    assert found.origin[mp.USER_LEVEL] == rf"HKLM\{chrome}"
    assert mp.evaluate(found) is mp.Permission.DISALLOW
    edge = mp.PolicyReader(Os.WIN32, registry_factory=lambda: registry).read("edge")
    assert edge == mp.Settings()


# --- doctor, in process (policy locations live under a simulated root) ---------------------
ECHO_HOST = """\
import json, struct, sys
size = struct.unpack("<I", sys.stdin.buffer.read(4))[0]
request = json.loads(sys.stdin.buffer.read(size))
body = json.dumps({"type": "response", "requestId": request["requestId"], "ok": True,
                   "result": {}}).encode()
sys.stdout.buffer.write(struct.pack("<I", len(body)) + body)
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
"""


def write_manifest(directory: Path, host: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": HOST_NAME,
        "description": "x",
        "path": str(host),
        "type": "stdio",
        "allowed_origins": [OFFICIAL],
    }
    (directory / f"{HOST_NAME}.json").write_text(json.dumps(manifest))


@pytest.fixture
def user_manifest(tmp_path: Path, env: dict[str, str]) -> Path:
    """Chrome's user-level manifest, naming a host that answers ping."""
    host = tmp_path / "bin" / "host"
    host.parent.mkdir()
    host.write_text(f"#!{sys.executable}\n{ECHO_HOST}")
    host.chmod(0o755)
    write_manifest(Path(env["HOME"]) / ".config" / "google-chrome" / "NativeMessagingHosts", host)
    return host


def run_doctor(env: dict[str, str], root: Path, platform: str = "linux") -> list[doc.Finding]:
    doctor = doc.Doctor(platform, env, PurePath(env["HOME"]), system_root=root)
    return [f for f in doc.diagnose(doctor, ["chrome"], []) if f.subject == "chrome"]


def checks(findings: list[doc.Finding]) -> dict[str, doc.Finding]:
    return {f.check: f for f in findings}


def test_doctor_without_policies_says_nothing_restricts(
    tmp_path: Path, env: dict[str, str], user_manifest: Path
) -> None:
    found = checks(run_doctor(env, tmp_path / "root"))
    assert found["managed policy"].status is doc.Status.OK
    assert "no managed policy" in found["managed policy"].detail
    assert found["host answers ping"].status is doc.Status.OK


def test_doctor_reports_a_blocklisted_host_with_the_administrators_fix(
    tmp_path: Path, env: dict[str, str], user_manifest: Path
) -> None:
    root = tmp_path / "root"
    write_json_policy(root, "/etc/opt/chrome/policies/managed", "p.json", {mp.BLOCKLIST: ["*"]})
    findings = run_doctor(env, root)
    policy = checks(findings)["managed policy"]
    assert policy.status is doc.Status.FAIL
    assert policy.symptom == BLOCKED
    assert "/etc/opt/chrome/policies/managed/p.json" in policy.detail
    assert "administrator" in policy.hint and mp.ALLOWLIST in policy.hint
    write_json_policy(
        root, "/etc/opt/chrome/policies/managed", "q.json", {mp.ALLOWLIST: [HOST_NAME]}
    )
    assert checks(run_doctor(env, root))["managed policy"].status is doc.Status.OK


def test_doctor_with_user_level_hosts_off_ignores_the_user_manifest(
    tmp_path: Path, env: dict[str, str], user_manifest: Path
) -> None:
    root = tmp_path / "root"
    write_json_policy(root, "/etc/opt/chrome/policies/managed", "p.json", {mp.USER_LEVEL: False})
    found = checks(run_doctor(env, root))
    user_level = Path(env["HOME"]) / ".config/google-chrome/NativeMessagingHosts" / MANIFEST
    assert found["managed policy"].status is doc.Status.FAIL
    assert found["managed policy"].symptom == NOT_FOUND
    # The fix names what to install: the release tarball, extracted by root, registered
    # for every user by its own install (docs/install.md, "For administrators").
    everyone = (
        f"as root, extract pedelec-native-host-{__version__}-linux-{platform.machine()}.tar.gz "
        "into /opt and run `sudo /opt/pedelec-native-host/pedelec-native-host install "
        "--scope system --browser all`"
    )
    assert found["managed policy"].hint.startswith(everyone + "; or ask your administrator")
    assert found["manifest present"].status is doc.Status.FAIL
    assert found["manifest present"].detail.endswith(
        f"; user-level manifests ignored by policy: {user_level}"
    )
    assert found["manifest present"].hint == everyone
    # A system-level manifest is what such a browser loads: then all is well.
    write_manifest(root / "etc/opt/chrome/native-messaging-hosts", user_manifest)
    found = checks(run_doctor(env, root))
    assert found["managed policy"].status is doc.Status.OK
    assert found["manifest present"].status is doc.Status.OK
    system = root / "etc/opt/chrome/native-messaging-hosts" / MANIFEST
    assert found["manifest present"].detail == (
        f"{system} (system level: the one chrome loads; ignores {user_level}: "
        "user-level hosts are off by policy)"
    )
    assert found["host answers ping"].status is doc.Status.OK


def test_doctor_names_the_macos_system_package_when_user_level_hosts_are_off(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = tmp_path / "root"
    prefs = root / "Library/Managed Preferences"
    prefs.mkdir(parents=True)
    (prefs / "com.google.Chrome.plist").write_bytes(plistlib.dumps({mp.USER_LEVEL: False}))
    found = checks(run_doctor(env, root, platform="darwin"))
    assert found["managed policy"].status is doc.Status.FAIL
    assert found["managed policy"].hint.startswith(
        "install the system package as an administrator: `sudo installer -pkg "
        f"pedelec-native-host-{__version__}-system.pkg -target /`; or "
    )


def test_doctor_reads_windows_policy_keys(
    tmp_path: Path, env: dict[str, str], user_manifest: Path
) -> None:
    manifest = Path(env["HOME"]) / ".config" / "google-chrome" / "NativeMessagingHosts"
    key = RegistryKey("HKCU", r"Software\Google\Chrome\NativeMessagingHosts\cc.isaaclin.pedelec")
    registry = FakeRegistry({key: str(manifest / f"{HOST_NAME}.json")})
    policies = FakePolicyRegistry(
        {RegistryKey("HKLM", rf"SOFTWARE\Policies\Google\Chrome\{mp.BLOCKLIST}"): {"1": "*"}}
    )
    doctor = doc.Doctor(
        "win32",
        dict(env, LOCALAPPDATA=str(tmp_path / "local")),
        PurePath(env["HOME"]),
        registry_factory=lambda: registry,
        policy_registry_factory=lambda: policies,
    )
    found = checks([f for f in doc.diagnose(doctor, ["chrome"], []) if f.subject == "chrome"])
    assert found["managed policy"].status is doc.Status.FAIL
    assert rf"HKLM\SOFTWARE\Policies\Google\Chrome\{mp.BLOCKLIST}" in found["managed policy"].detail
    assert found["manifest present"].status is doc.Status.OK


# --- Windows: the per-user and the per-machine MSI under NativeMessagingUserLevelHosts ----------
CHROME_HOST_KEY = rf"Software\Google\Chrome\NativeMessagingHosts\{HOST_NAME}"
POLICY_KEY = RegistryKey("HKLM", r"SOFTWARE\Policies\Google\Chrome")
INSTALLER_KEY = r"Software\pedelec-native-host\Installer"


def msi_install(folder: Path) -> tuple[Path, Path]:
    """An MSI's folder: the host answering ping, its manifest beside it."""
    folder.mkdir(parents=True)
    host = folder / "pedelec-native-host.exe"
    host.write_text(f"#!{sys.executable}\n{ECHO_HOST}")
    host.chmod(0o755)
    write_manifest(folder, host)
    return host, folder / MANIFEST


@pytest.fixture
def msis(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    return {
        "user": msi_install(tmp_path / "user" / "Programs" / "pedelec-native-host"),
        "machine": msi_install(tmp_path / "Program Files" / "pedelec-native-host"),
    }


def windows_doctor(
    tmp_path: Path,
    env: dict[str, str],
    installed: dict[str, Path],
    policy: dict[str, object],
    running: Path,
) -> dict[str, doc.Finding]:
    """Doctor for Chrome on Windows with the given MSIs installed (`installed`: scope ->
    install folder; each registers its manifest and remembers its folder, as the MSIs
    do) and the machine's Chrome policy key."""
    hives = {"user": "HKCU", "machine": "HKLM"}
    registry = FakeRegistry({
        RegistryKey(hives[scope], CHROME_HOST_KEY): str(folder / MANIFEST)
        for scope, folder in installed.items()
    })  # fmt: skip
    values: dict[RegistryKey, dict[str, object]] = {POLICY_KEY: policy}
    for scope, folder in installed.items():
        values[RegistryKey(hives[scope], INSTALLER_KEY)] = {"InstallDir": f"{folder}/"}
    doctor = doc.Doctor(
        "win32", dict(env, LOCALAPPDATA=str(tmp_path / "local")), PurePath(env["HOME"]),
        registry_factory=lambda: registry,
        policy_registry_factory=lambda: FakePolicyRegistry(values), bundle=running,
    )  # fmt: skip
    return checks([f for f in doc.diagnose(doctor, ["chrome"], []) if f.subject == "chrome"])


def test_the_per_user_msi_alone_is_ignored_by_policy_and_doctor_names_the_per_machine_one(
    tmp_path: Path, env: dict[str, str], msis: dict[str, tuple[Path, Path]]
) -> None:
    host, manifest = msis["user"]
    found = windows_doctor(tmp_path, env, {"user": host.parent}, {mp.USER_LEVEL: 0}, running=host)
    policy = found["managed policy"]
    assert policy.status is doc.Status.FAIL and policy.symptom == NOT_FOUND
    assert rf"{mp.USER_LEVEL} is false (HKLM\SOFTWARE\Policies\Google\Chrome)" in policy.detail
    machine_msi = f"`msiexec /i pedelec-native-host-{__version__}-x64-machine.msi /qn`"
    assert machine_msi in policy.hint and "as an administrator" in policy.hint
    present = found["manifest present"]
    assert present.status is doc.Status.FAIL and present.hint.endswith(machine_msi)
    assert present.detail.endswith(
        "; user-level manifests ignored by policy: "
        f"HKCU\\{CHROME_HOST_KEY} (32-bit view) -> {manifest}"
    )


def test_with_both_msis_the_policy_decides_which_one_chrome_loads_and_doctor_says_so(
    tmp_path: Path, env: dict[str, str], msis: dict[str, tuple[Path, Path]]
) -> None:
    """Same version installed per user and per machine: Chrome reads HKCU first unless
    the policy turns user-level hosts off; doctor, run from either executable, calls the
    other's host one of this package's own."""
    (user_host, user_manifest), (machine_host, machine_manifest) = msis["user"], msis["machine"]
    both = {"user": user_host.parent, "machine": machine_host.parent}

    found = windows_doctor(tmp_path, env, both, {mp.USER_LEVEL: 0}, running=user_host)
    assert found["managed policy"].status is doc.Status.OK
    present = found["manifest present"]
    assert present.status is doc.Status.OK
    assert present.detail == (
        f"HKLM\\{CHROME_HOST_KEY} -> {machine_manifest} (per-machine: the one chrome loads; "
        f"ignores HKCU\\{CHROME_HOST_KEY} (32-bit view) -> {user_manifest}: user-level hosts "
        "are off by policy)"
    )
    registered = found["host registered"]
    assert registered.status is doc.Status.OK
    assert registered.detail == f"the per-machine MSI's host ({machine_host})"
    assert found["host answers ping"].status is doc.Status.OK

    found = windows_doctor(tmp_path, env, both, {}, running=machine_host)
    present = found["manifest present"]
    assert present.status is doc.Status.OK and f"-> {user_manifest}" in present.detail
    assert "per-machine" not in present.detail and f"-> {machine_manifest}" in present.detail
    registered = found["host registered"]
    assert registered.detail == f"the per-user MSI's host ({user_host})"
