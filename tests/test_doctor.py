"""`doctor` on a good install and on each kind of broken one, in temporary homes only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.install import doctor as doc
from native_host.install.locations import RegistryKey
from tests.conftest import FakeRegistry

REPO = Path(__file__).resolve().parent.parent
MANIFEST = f"{HOST_NAME}.json"
OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
DEV_ID = "abcdefghijklmnopabcdefghijklmnop"

NOT_FOUND = '"Specified native messaging host not found."'
FORBIDDEN = '"Access to the specified native messaging host is forbidden."'
EXITED = '"Native host has exited."'
COMMUNICATION = '"Error when communicating with the native messaging host."'

ECHO_HOST = """\
import json, struct, sys
size = struct.unpack("<I", sys.stdin.buffer.read(4))[0]
request = json.loads(sys.stdin.buffer.read(size))
reply = {"type": "response", "requestId": request["requestId"], **REPLY}
body = json.dumps(reply).encode()
sys.stdout.buffer.write(struct.pack("<I", len(body)) + body)
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
"""
OK_REPLY = {"ok": True, "result": {"connected": True}}
CORE_DOWN_REPLY = {
    "ok": False,
    "error": {
        "code": "CORE_RUNTIME_UNAVAILABLE",
        "message": "pedelec-app is not running",
        "details": {"stage": "discover_core"},
    },
}


def write_host(path: Path, body: str, mode: int = 0o755) -> Path:
    """A host script run by this interpreter, standing in for any framing-speaking build."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(mode)
    return path


def echo_host(path: Path, reply: dict[str, Any] = OK_REPLY) -> Path:
    return write_host(path, f"REPLY = {reply!r}\n{ECHO_HOST}")


class PingCore:
    """A loopback TCP server answering each Core `ping` line with ok:true."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("rb").readline()
                request = json.loads(line)
                self.requests.append(request)
                reply = {
                    "requestId": request["requestId"],
                    "ok": True,
                    "result": {"connected": True},
                }
                conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def core(tmp_path: Path) -> Iterator[PingCore]:
    """A running Core: runtime.json pointing at a live loopback server."""
    server = PingCore()
    home = tmp_path / "pedelec-home"
    home.mkdir(exist_ok=True)
    (home / "runtime.json").write_text(
        json.dumps(
            {
                "protocol": "pedelec-core-ipc-v1",
                "host": "127.0.0.1",
                "port": server.port,
                "endpoint": f"127.0.0.1:{server.port}",
                "pid": os.getpid(),
            }
        )
    )
    yield server
    server.close()


def write_launch_config(tmp_path: Path, **override: Any) -> Path:
    app = tmp_path / "desktop" / "pedelec-app"
    app.parent.mkdir(parents=True, exist_ok=True)
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    config = {"version": 1, "executablePath": str(app), "backgroundArgs": ["--background"]}
    config.update(override)
    home = tmp_path / "pedelec-home"
    home.mkdir(exist_ok=True)
    path = home / "app-launch.json"
    path.write_text(json.dumps(config))
    return path


def write_manifest(profile: Path, **fields: Any) -> Path:
    manifest = {
        "name": HOST_NAME,
        "description": "Pedelec native messaging host",
        "path": "/nonexistent",
        "type": "stdio",
        "allowed_origins": [OFFICIAL],
    }
    manifest.update(fields)
    path = profile / "NativeMessagingHosts" / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    return path


def run(env: dict[str, str], *args: str) -> tuple[int, list[dict[str, str]], str]:
    """`pedelec-native-host doctor --json ...` as a user would run it."""
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", "--json", *args],
        env=env, capture_output=True, text=True, timeout=90, cwd=REPO,
    )  # fmt: skip
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def finding(findings: list[dict[str, str]], check: str) -> dict[str, str]:
    matches = [f for f in findings if f["check"] == check]
    assert matches, f"no {check!r} in {[f['check'] for f in findings]}"
    return matches[0]


def install(env: dict[str, str], *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "install", *args],
        env=env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


# --- a good install ---------------------------------------------------------------------
def test_good_install_is_all_ok(tmp_path: Path, env: dict[str, str], core: PingCore) -> None:
    host = echo_host(tmp_path / "bin" / "host")
    write_launch_config(tmp_path)
    profile = tmp_path / "profile"
    install(env, "--user-data-dir", str(profile), "--host-path", str(host))
    code, findings, _ = run(env, "--user-data-dir", str(profile))
    assert code == 0
    assert [f for f in findings if f["status"] != "ok"] == []
    checks = [f["check"] for f in findings]
    for expected in (
        "manifest present", "manifest JSON", "name", "type", "path absolute", "path exists",
        "path executable", "official extension allowed", "host answers ping",
        "host exits on EOF", "runtime.json", "Core answers ping", "app-launch.json",
        "origins.json", "config.json", "log location",
    ):  # fmt: skip
        assert expected in checks
    assert core.requests == [{"requestId": "doctor", "type": "ping", "payload": {}}]


def test_text_output_is_one_line_per_check(tmp_path: Path, env: dict[str, str]) -> None:
    profile = tmp_path / "profile"
    write_manifest(profile, name="wrong.name", path=str(echo_host(tmp_path / "h")))
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", "--user-data-dir", str(profile)],
        env=env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 1
    line = next(x for x in result.stdout.splitlines() if " name: " in x)
    assert line.startswith("fail")
    assert f"symptom: {NOT_FOUND}" in line
    assert f"install --user-data-dir {profile}" in line


def test_default_checks_installed_browsers(tmp_path: Path, env: dict[str, str]) -> None:
    chromium = Path(env["HOME"]) / ".config" / "chromium"
    chromium.mkdir(parents=True)
    code, findings, _ = run(env)
    present = [f for f in findings if f["check"] == "manifest present"]
    assert [(f["subject"], f["status"]) for f in present] == [("chromium", "fail")]
    assert "install --browser chromium" in present[0]["hint"]
    assert code == 1
    install(env, "--host-path", str(echo_host(tmp_path / "h")))
    _, findings, _ = run(env)
    assert finding(findings, "manifest present")["status"] == "ok"
    assert finding(findings, "host answers ping")["status"] == "ok"


# --- broken manifests -------------------------------------------------------------------
def broken(tmp_path: Path, **fields: Any) -> Path:
    profile = tmp_path / "profile"
    if "path" not in fields:
        fields["path"] = str(echo_host(tmp_path / "bin" / "host"))
    write_manifest(profile, **fields)
    return profile


@pytest.mark.parametrize(
    ("fields", "check", "symptom", "hint"),
    [
        ({"name": "com.example.wrong"}, "name", NOT_FOUND, "install --user-data-dir"),
        ({"type": "socket"}, "type", NOT_FOUND, "install --user-data-dir"),
        ({"path": "bin/host"}, "path absolute", NOT_FOUND, "install --user-data-dir"),
        ({"path": "/nonexistent/host"}, "path exists", NOT_FOUND, "install --user-data-dir"),
        (
            {"allowed_origins": [f"chrome-extension://{DEV_ID}/"]},
            "official extension allowed",
            FORBIDDEN,
            "install --user-data-dir",
        ),
        (
            {"allowed_origins": [OFFICIAL, "chrome-extension://*/"]},
            "allowed_origins valid",
            NOT_FOUND,
            "install --user-data-dir",
        ),
    ],
)
def test_broken_manifest_fields(
    tmp_path: Path, env: dict[str, str], fields: dict[str, Any], check: str, symptom: str, hint: str
) -> None:
    profile = broken(tmp_path, **fields)
    code, findings, _ = run(env, "--user-data-dir", str(profile))
    problem = finding(findings, check)
    assert problem["status"] == "fail"
    assert problem["symptom"] == symptom
    assert hint in problem["hint"]
    assert code == 1


def test_missing_manifest(tmp_path: Path, env: dict[str, str]) -> None:
    code, findings, _ = run(env, "--user-data-dir", str(tmp_path / "empty"))
    problem = finding(findings, "manifest present")
    assert (problem["status"], problem["symptom"]) == ("fail", NOT_FOUND)
    assert str(tmp_path / "empty" / "NativeMessagingHosts" / MANIFEST) in problem["detail"]
    assert "install --user-data-dir" in problem["hint"]
    assert code == 1


def test_bad_json(tmp_path: Path, env: dict[str, str]) -> None:
    profile = tmp_path / "profile"
    path = write_manifest(profile)
    path.write_text('{"name": "cc.isaaclin.pedelec",')
    code, findings, _ = run(env, "--user-data-dir", str(profile))
    problem = finding(findings, "manifest JSON")
    assert (problem["status"], problem["symptom"]) == ("fail", NOT_FOUND)
    assert code == 1


def test_relative_path_skips_the_checks_that_need_it(tmp_path: Path, env: dict[str, str]) -> None:
    profile = broken(tmp_path, path="bin/host")
    _, findings, _ = run(env, "--user-data-dir", str(profile))
    checks = [f["check"] for f in findings]
    assert "path exists" not in checks and "host answers ping" not in checks


def test_non_executable_path(tmp_path: Path, env: dict[str, str]) -> None:
    host = echo_host(tmp_path / "bin" / "host")
    host.chmod(0o644)
    code, findings, _ = run(env, "--user-data-dir", str(broken(tmp_path, path=str(host))))
    problem = finding(findings, "path executable")
    assert (problem["status"], problem["symptom"]) == ("fail", EXITED)
    assert "chmod 755" in problem["hint"]
    assert "host answers ping" not in [f["check"] for f in findings]
    assert code == 1


def test_extra_ids_must_match_the_config(tmp_path: Path, env: dict[str, str]) -> None:
    profile = broken(tmp_path, allowed_origins=[OFFICIAL, f"chrome-extension://{DEV_ID}/"])
    _, findings, _ = run(env, "--user-data-dir", str(profile))
    problem = finding(findings, "extra extension ids")
    assert problem["status"] == "warn"
    assert "config.json does not" in problem["detail"]
    assert "--extension-id" in problem["hint"]

    install(env, "--user-data-dir", str(tmp_path / "p2"), "--extension-id", DEV_ID,
            "--host-path", str(tmp_path / "bin" / "host"))  # fmt: skip
    _, findings, _ = run(env, "--user-data-dir", str(tmp_path / "p2"))
    assert finding(findings, "extra extension ids") == finding(findings, "extra extension ids") | {
        "status": "ok",
        "detail": DEV_ID,
    }


# --- the host self-test -----------------------------------------------------------------
def test_host_that_exits_before_answering(tmp_path: Path, env: dict[str, str]) -> None:
    host = write_host(
        tmp_path / "bin" / "host", "import sys\nsys.stderr.write('boom\\n')\nsys.exit(3)\n"
    )
    code, findings, _ = run(env, "--user-data-dir", str(broken(tmp_path, path=str(host))))
    problem = finding(findings, "host answers ping")
    assert (problem["status"], problem["symptom"]) == ("fail", EXITED)
    assert "status 3" in problem["detail"]  # stderr tail ("boom") is best effort
    assert code == 1


def test_host_that_prints_to_stdout(tmp_path: Path, env: dict[str, str]) -> None:
    host = write_host(tmp_path / "bin" / "host", "print('hello from a stray print')\n")
    code, findings, _ = run(env, "--user-data-dir", str(broken(tmp_path, path=str(host))))
    problem = finding(findings, "host answers ping")
    assert problem["status"] == "fail"
    assert problem["symptom"] == COMMUNICATION
    assert code == 1


def test_host_that_never_answers(tmp_path: Path, env: dict[str, str]) -> None:
    host = write_host(tmp_path / "bin" / "host", "import time\ntime.sleep(60)\n")
    profile = broken(tmp_path, path=str(host))
    code, findings, _ = run(env, "--user-data-dir", str(profile), "--timeout", "1")
    problem = finding(findings, "host answers ping")
    assert problem["status"] == "fail"
    assert "no answer within 1 s" in problem["detail"]
    assert code == 1


def test_host_reporting_a_core_error_still_works(tmp_path: Path, env: dict[str, str]) -> None:
    host = echo_host(tmp_path / "bin" / "host", CORE_DOWN_REPLY)
    _, findings, _ = run(env, "--user-data-dir", str(broken(tmp_path, path=str(host))))
    assert finding(findings, "host answers ping")["status"] == "ok"
    core_error = finding(findings, "Core through the host")
    assert core_error["status"] == "warn"
    assert "CORE_RUNTIME_UNAVAILABLE" in core_error["detail"]


def test_real_launcher_against_the_real_relay(
    tmp_path: Path, env: dict[str, str], core: PingCore
) -> None:
    write_launch_config(tmp_path)
    profile = tmp_path / "profile"
    install(env, "--user-data-dir", str(profile))
    code, findings, _ = run(env, "--user-data-dir", str(profile))
    ping = finding(findings, "host answers ping")
    assert ping["status"] == "ok", findings
    assert finding(findings, "host exits on EOF")["status"] == "ok"
    assert code == 0, [f for f in findings if f["status"] != "ok"]


# --- the Core side ----------------------------------------------------------------------
def good_profile(tmp_path: Path) -> Path:
    return broken(tmp_path)


def test_missing_core_runtime_and_launch_config(tmp_path: Path, env: dict[str, str]) -> None:
    code, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    runtime = finding(findings, "runtime.json")
    assert runtime["status"] == "warn" and "not found" in runtime["detail"]
    ping = finding(findings, "Core answers ping")
    assert ping["status"] == "fail"
    assert "start Pedelec Desktop" in ping["hint"]
    assert "CORE_RUNTIME_UNAVAILABLE" in ping["symptom"]
    assert code == 1


def test_missing_core_runtime_with_valid_launch_config_is_a_warning(
    tmp_path: Path, env: dict[str, str]
) -> None:
    write_launch_config(tmp_path)
    code, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    ping = finding(findings, "Core answers ping")
    assert ping["status"] == "warn"
    assert "start Pedelec Desktop in the background" in ping["detail"]
    assert finding(findings, "app-launch.json")["status"] == "ok"
    assert code == 0


def test_stale_runtime_is_not_pinged(tmp_path: Path, env: dict[str, str], core: PingCore) -> None:
    runtime = tmp_path / "pedelec-home" / "runtime.json"
    data = json.loads(runtime.read_text())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    runtime.write_text(json.dumps(data | {"pid": dead.pid}))
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    assert "stale" in finding(findings, "runtime.json")["detail"]
    assert core.requests == []


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ({"backgroundArgs": ["--bg"]}, 'backgroundArgs must be exactly ["--background"]'),
        ({"version": 2}, "version must be 1"),
        ({"executablePath": "relative/app"}, "executablePath must be an absolute path"),
        ({"executablePath": 7}, "not valid JSON"),
    ],
)
def test_invalid_launch_config(
    tmp_path: Path, env: dict[str, str], override: dict[str, Any], words: str
) -> None:
    write_launch_config(tmp_path, **override)
    code, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    problem = finding(findings, "app-launch.json")
    assert problem["status"] == "fail"
    assert words in problem["detail"]
    assert "start Pedelec Desktop once in the foreground" in problem["hint"]
    assert finding(findings, "Core answers ping")["status"] == "fail"
    assert code == 1


def test_group_writable_desktop_executable(tmp_path: Path, env: dict[str, str]) -> None:
    write_launch_config(tmp_path)
    (tmp_path / "desktop" / "pedelec-app").chmod(0o775)
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    assert "group- or other-writable" in finding(findings, "app-launch.json")["detail"]


def test_invalid_launch_config_is_only_a_warning_while_core_runs(
    tmp_path: Path, env: dict[str, str], core: PingCore
) -> None:
    write_launch_config(tmp_path, version=2)
    code, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    assert finding(findings, "Core answers ping")["status"] == "ok"
    assert finding(findings, "app-launch.json")["status"] == "warn"
    assert code == 0


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "Expecting property name"),
        ('{"version": 2, "mode": "extension"}', "version 2"),
        ('{"version": 1, "mode": "open"}', "mode 'open'"),
    ],
)
def test_invalid_origin_policy(
    tmp_path: Path, env: dict[str, str], core: PingCore, content: str, words: str
) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "origins.json").write_text(content)
    code, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    problem = finding(findings, "origins.json")
    assert problem["status"] == "fail" and words in problem["detail"]
    assert "policy_invalid" in problem["symptom"]
    assert code == 1


def test_invalid_config_json_is_a_warning(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.json").write_text('{"connectTimeoutMs": -1}')
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    problem = finding(findings, "config.json")
    assert problem["status"] == "warn" and "connectTimeoutMs" in problem["detail"]


# --- Windows, in process with a fake registry ---------------------------------------------
def test_windows_reads_the_manifest_named_by_the_registry(
    tmp_path: Path, env: dict[str, str]
) -> None:
    manifest = write_manifest(tmp_path / "anywhere", path=str(echo_host(tmp_path / "h")))
    tail = r"NativeMessagingHosts\cc.isaaclin.pedelec"
    registry = FakeRegistry({RegistryKey("HKCU", rf"Software\Chromium\{tail}"): str(manifest)})
    win_env = dict(env, LOCALAPPDATA=str(tmp_path / "local"))
    doctor = doc.Doctor("win32", win_env, PurePath(env["HOME"]), registry_factory=lambda: registry)
    findings = doc.diagnose(doctor, ["edge", "chrome"], [])
    by_subject = {(f.subject, f.check): f for f in findings}
    edge = by_subject[("edge", "manifest present")]
    assert edge.status is doc.Status.OK and r"Software\Chromium" in edge.detail
    chrome = by_subject[("chrome", "manifest present")]
    assert chrome.status is doc.Status.FAIL and chrome.symptom == NOT_FOUND
    assert by_subject[("edge", "host answers ping")].status is doc.Status.OK
