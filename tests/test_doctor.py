"""`doctor` on a good install and on each kind of broken one, in temporary homes only."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.hostproc import HostProcess
from native_host.install import doctor as doc
from native_host.install import installer, interpreter, locations
from native_host.install.doctor import selftest
from native_host.install.locations import RegistryKey, RegistryView
from tests.support.host import host_command
from tests.support.profiles import store_entry, write_user_data
from tests.support.registry import FakePolicyRegistry, FakeRegistry
from tests.support.runtime import write_runtime

pytestmark = pytest.mark.process

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
    write_runtime(tmp_path / "pedelec-home", server.port, os.getpid())
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
    return result.returncode, json.loads(result.stdout)["findings"], result.stderr


def finding(findings: list[dict[str, str]], check: str) -> dict[str, str]:
    matches = [f for f in findings if f["check"] == check]
    assert matches, f"no {check!r} in {[f['check'] for f in findings]}"
    return matches[0]


def install(env: dict[str, str], *args: str) -> None:
    """`install --force`: the suite runs from an editable checkout (see test_install)."""
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "install", "--force", *args],
        env=env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


# --- a good install ---------------------------------------------------------------------
def test_good_install_is_all_ok(tmp_path: Path, env: dict[str, str], core: PingCore) -> None:
    host = echo_host(tmp_path / "bin" / "host")
    write_launch_config(tmp_path)
    profile = tmp_path / "profile"
    install(env, "--user-data-dir", str(profile), "--host-path", str(host))
    write_user_data(profile, {"Default": {OFFICIAL_EXTENSION_ID: store_entry()}})
    code, findings, _ = run(env, "--user-data-dir", str(profile))
    assert code == 0
    assert [f for f in findings if f["status"] != "ok"] == []
    checks = [f["check"] for f in findings]
    for expected in (
        "manifest present", "manifest JSON", "name", "type", "path absolute", "path exists",
        "path executable", "official extension allowed", "host answers ping",
        "host exits on EOF", "profiles", "extension", "runtime.json", "Core answers ping",
        "app-launch.json", "origins.json", "config.json", "log location",
    ):  # fmt: skip
        assert expected in checks
    (ping,) = core.requests  # the gateway's own ping: nothing else reached the Core
    assert (ping["type"], ping["payload"]) == ("ping", {})
    assert ping["requestId"].startswith("host_ping_")


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
    """Writable by a group with other members (not the user's private group): doctor
    says so in the host's own words, naming the file."""
    write_launch_config(tmp_path)
    app = tmp_path / "desktop" / "pedelec-app"
    app.chmod(0o775)
    os.chown(app, -1, next(g for g in (50, 65534, 100) if g != os.getegid()))
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    detail = finding(findings, "app-launch.json")["detail"]
    assert f"{app} (the executable) is writable by other users" in detail


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
        ("{not json", "not valid JSON: Expecting property name"),
        ('{"version": 2, "mode": "extension"}', "version: must be 1"),
        ('{"version": 1, "mode": "open"}', "mode: must be 'extension' or 'strict'"),
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
    doctor = doc.Doctor(
        "win32",
        win_env,
        PurePath(env["HOME"]),
        registry_factory=lambda: registry,
        policy_registry_factory=FakePolicyRegistry,
    )
    findings = doc.diagnose(doctor, ["edge", "chrome"], [])
    by_subject = {(f.subject, f.check): f for f in findings}
    edge = by_subject[("edge", "manifest present")]
    assert edge.status is doc.Status.OK and r"Software\Chromium" in edge.detail
    chrome = by_subject[("chrome", "manifest present")]
    assert chrome.status is doc.Status.FAIL and chrome.symptom == NOT_FOUND
    assert by_subject[("edge", "host answers ping")].status is doc.Status.OK


# --- a host that cannot start never crashes the doctor (issue 13) ----------------------------
def assert_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr and "Error:" not in stderr.replace("error:", ""), stderr


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("import sys\nsys.exit(0)\n", "closed stdout before answering (status 0)"),
        ("import sys\nsys.exit(127)\n", "a program it runs was not found (exit status 127)"),
        ("import sys\nsys.exit(126)\n", "a program it runs is not executable (exit status 126)"),
        (
            "import os, time\nos.close(0)\nos.close(1)\ntime.sleep(30)\n",
            "closed stdout before answering (still running)",
        ),
        (
            "import sys\nsys.stderr.write('first problem\\nsecond\\n')\nsys.exit(3)\n",
            "(status 3); stderr: first problem",
        ),
        (  # what the Windows bundle's executable says without its interpreter's DLL
            "import sys\nsys.stderr.write('pedelec-native-host: cannot load C:\\\\x\\\\"
            "python313.dll (Windows error 126): reinstall it\\n')\nsys.exit(3)\n",
            "incomplete (its interpreter cannot be loaded)",
        ),
    ],
)
def test_host_that_exits_or_closes_its_pipes(
    tmp_path: Path, env: dict[str, str], body: str, words: str
) -> None:
    host = write_host(tmp_path / "bin" / "host", body)
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", "--json", "--user-data-dir",
         str(broken(tmp_path, path=str(host)))],
        env=env, capture_output=True, text=True, timeout=90, cwd=REPO,
    )  # fmt: skip
    assert_no_traceback(result.stderr)
    problem = finding(json.loads(result.stdout)["findings"], "host answers ping")
    assert (problem["status"], problem["symptom"]) == ("fail", EXITED)
    assert words in problem["detail"]
    assert result.returncode == 1


def test_a_host_exiting_at_once_is_a_finding_every_time(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The race that crashed doctor with BrokenPipeError: the ping written after the exit."""
    host = write_host(tmp_path / "bin" / "host", "")
    verdicts = {
        (f.status, f.check, f.symptom)
        for _ in range(20)
        for f in selftest.run_self_test(host, env, 5)
    }
    assert verdicts == {(doc.Status.FAIL, "host answers ping", EXITED)}


def test_host_writing_garbage_is_reported_at_once(tmp_path: Path, env: dict[str, str]) -> None:
    host = write_host(
        tmp_path / "bin" / "host",
        "import sys, time\nsys.stdout.buffer.write(b'garbage, not a frame at all')\n"
        "sys.stdout.flush()\ntime.sleep(60)\n",
    )
    started = time.monotonic()
    code, findings, stderr = run(
        env, "--user-data-dir", str(broken(tmp_path, path=str(host))), "--timeout", "30"
    )
    assert time.monotonic() - started < 20  # not the 30 s timeout
    assert_no_traceback(stderr)
    problem = finding(findings, "host answers ping")
    assert problem["symptom"] == COMMUNICATION and "exceeds 1048576" in problem["detail"]
    assert code == 1


def test_a_deleted_venv_is_named_as_the_cause(tmp_path: Path, env: dict[str, str]) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    # what this test process imports from (the checkout, its dependencies), whether or not
    # the interpreter running the tests is itself a venv's: a .pth is read even under -I
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "outer.pth").write_text("\n".join(p for p in sys.path if p and Path(p).is_dir()))
    ctx = installer.Environment(
        platform="linux", env=env, home=Path(env["HOME"]), executable=str(venv / "bin" / "python"),
        frozen=False, out=None,
    )  # fmt: skip
    profile = tmp_path / "profile"
    options = installer.InstallOptions(user_data_dirs=(profile,), force=True)
    installer.install(options, ctx)
    code, findings, stderr = run(env, "--user-data-dir", str(profile))
    assert finding(findings, "host answers ping")["status"] == "ok", findings  # it worked
    shutil.rmtree(venv)
    code, findings, stderr = run(env, "--user-data-dir", str(profile))
    assert_no_traceback(stderr)
    # the launcher names its interpreter on its `#!` line: it cannot even be executed now
    problem = finding(findings, "host starts")
    assert (problem["status"], problem["symptom"]) == ("fail", EXITED)
    assert f"the launcher's interpreter {venv / 'bin' / 'python'} is gone" in problem["detail"]
    assert "pipx install" in problem["hint"]
    assert code == 1


# --- what doctor checks (issue 13) ------------------------------------------------------------
def test_bare_doctor_checks_what_the_install_record_lists(
    tmp_path: Path, env: dict[str, str]
) -> None:
    profile = tmp_path / "custom-profile"
    install(env, "--user-data-dir", str(profile), "--host-path", str(echo_host(tmp_path / "h")))
    install(env, "--browser", "edge", "--host-path", str(echo_host(tmp_path / "h")))
    _, findings, _ = run(env)
    subjects = {f["subject"] for f in findings}
    assert {"profile custom-profile", "edge"} <= subjects
    assert "browsers" not in subjects  # no "no Chromium-based browser found"
    record = finding(findings, "install record")
    assert record["status"] == "ok" and "2 files, 0 keys" in record["detail"]
    ping = [f for f in findings if f["check"] == "host answers ping"]
    assert [f["status"] for f in ping] == ["ok", "ok"]


def test_doctor_reports_an_install_record_it_cannot_trust(
    tmp_path: Path, env: dict[str, str]
) -> None:
    install(
        env, "--user-data-dir", str(tmp_path / "p"), "--host-path", str(echo_host(tmp_path / "h"))
    )
    (tmp_path / "state" / "install-record.json").chmod(0o646)
    code, findings, stderr = run(env)
    assert_no_traceback(stderr)
    record = finding(findings, "install record")
    assert record["status"] == "fail" and "writable by other users" in record["detail"]
    assert code == 1


def test_browser_all_checks_every_row(env: dict[str, str]) -> None:
    code, findings, stderr = run(env, "--browser", "all", "--timeout", "5")
    assert_no_traceback(stderr)
    subjects = [f["subject"] for f in findings if f["check"] in ("manifest present", "sandbox")]
    assert subjects == list(tuple(row.name for row in locations.rows_for("linux")))
    assert code == 1


@pytest.mark.parametrize("args", [["--browser", "firefox"], ["--timeout", "soon"], ["--nope"]])
def test_usage_errors_exit_2(env: dict[str, str], args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", *args],
        env=env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("pedelec-native-host doctor: error: "), line


def desktop_manifest(profile: Path, home: Path) -> Path:
    """What Pedelec Desktop registers: a manifest naming ~/.pedelec/pedelec-native-host."""
    host = echo_host(home / ".pedelec" / "pedelec-native-host")
    return write_manifest(profile, path=str(host))


def test_doctor_says_which_host_each_browser_runs(tmp_path: Path, env: dict[str, str]) -> None:
    home = Path(env["HOME"])
    profile = tmp_path / "profile"
    args = ("--user-data-dir", str(profile))
    desktop_manifest(profile, home)
    _, findings, _ = run(env, *args)
    which = finding(findings, "host registered")
    assert which["status"] == "ok" and which["detail"].startswith("Pedelec Desktop's host (")
    assert "switches to this one" in which["detail"]

    install(env, *args)
    _, findings, _ = run(env, *args)
    which = finding(findings, "host registered")
    assert (which["status"], which["detail"]) == (
        "ok",
        f"this host ({tmp_path / 'state' / 'pedelec-native-host'})",
    )

    desktop_manifest(profile, home)  # the Desktop's next foreground start
    _, findings, _ = run(env, *args)
    which = finding(findings, "host registered")
    assert which["status"] == "warn"
    assert "Pedelec Desktop registered its own host again" in which["detail"]
    assert f"install --user-data-dir {profile}` to switch back" in which["hint"]

    other = echo_host(tmp_path / "other" / "host")
    write_manifest(profile, path=str(other))
    _, findings, _ = run(env, *args)
    which = finding(findings, "host registered")
    assert which["status"] == "warn" and which["detail"].startswith(f"another host: {other}")


def test_missing_launch_config_says_to_open_the_desktop_once(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    launch = finding(findings, "app-launch.json")
    assert launch["status"] == "warn"
    assert launch["hint"].startswith(
        "open Pedelec Desktop once so it records how to start it in the background"
    )
    assert "pedelec-app" not in json.dumps(findings).replace('"pedelec-app is not running"', "")


# --- doctor judges each file with the host's own reader (issue 10) --------------------------
def test_origin_policy_the_host_refuses_is_reported(tmp_path: Path, env: dict[str, str]) -> None:
    """Regression: doctor used to call this policy fine while the host refused every page."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "origins.json").write_text('{"version":1,"approved":[{"origin":5}]}')
    with HostProcess(host_command(), env=env) as host:
        reply = host.request(
            {"type": "create_thread", "provider": "codex", "requestId": "r",
             "callerOrigin": "https://app.example.com"}
        )  # fmt: skip
    error = reply["error"]
    assert (error["code"], error["details"]["reason"]) == ("ORIGIN_NOT_APPROVED", "policy_invalid")
    code, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    policy = finding(findings, "origins.json")
    assert policy["status"] == "fail"
    assert policy["detail"] == error["details"]["error"]  # the host's own words
    assert code == 1


def test_config_the_host_ignores_is_reported(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "config").mkdir()
    config = {"allowedExtensionIds": [DEV_ID], "connectTimeoutMs": 0}
    (tmp_path / "config" / "config.json").write_text(json.dumps(config))
    with HostProcess(host_command(), [f"chrome-extension://{DEV_ID}/"], env=env) as host:
        refused = host.read(timeout=10)
        assert host.wait(5) == 2
    assert refused["error"]["code"] == "ORIGIN_NOT_APPROVED"
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    problem = finding(findings, "config.json")
    assert problem["status"] == "warn" and "connectTimeoutMs" in problem["detail"]
    assert "only the official extension is allowed" in problem["hint"]


def test_launch_config_the_host_refuses_is_reported(tmp_path: Path, env: dict[str, str]) -> None:
    write_launch_config(tmp_path, version=2)
    with HostProcess(host_command(), env=env) as host:
        reply = host.request({"type": "ping", "requestId": "p"}, timeout=15)
    details = reply["error"]["details"]
    assert (details["stage"], details["violation"]) == ("read_launch_config", "version")
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    launch = finding(findings, "app-launch.json")
    assert launch["status"] == "fail"
    assert (
        launch["detail"]
        == f"{details['launchConfigPath']}: {details['reason']} (version must be 1)"
    )


def test_runtime_json_the_host_refuses_is_reported_and_never_pinged(
    tmp_path: Path, env: dict[str, str], core: PingCore
) -> None:
    runtime = tmp_path / "pedelec-home" / "runtime.json"
    runtime.write_text(json.dumps(json.loads(runtime.read_text()) | {"protocol": "other-v2"}))
    with HostProcess(host_command(), env=env) as host:
        reply = host.request({"type": "ping", "requestId": "p"}, timeout=15)
    assert reply["ok"] is False and reply["error"]["code"] == "CORE_RUNTIME_UNAVAILABLE"
    assert core.requests == []  # the host never wrote to that port
    _, findings, _ = run(env, "--user-data-dir", str(good_profile(tmp_path)))
    problem = finding(findings, "runtime.json")
    assert problem["status"] == "fail"
    assert problem["detail"].endswith("runtime.json protocol is not pedelec-core-ipc-v1")
    assert finding(findings, "Core answers ping")["status"] == "fail"
    assert core.requests == []  # nor did doctor


def test_windows_reads_the_32_bit_view_before_the_64_bit_one(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """HKLM\\SOFTWARE has a key per view; Chromium loads the 32-bit one and the 64-bit one
    is shadowed. HKCU's shared key reads the same in both views: one registration."""
    ours = write_manifest(tmp_path / "ours", path=str(echo_host(tmp_path / "h")))
    other = write_manifest(tmp_path / "wow", path=str(echo_host(tmp_path / "h2")))
    chrome = RegistryKey("HKLM", r"Software\Google\Chrome\NativeMessagingHosts\cc.isaaclin.pedelec")
    edge = RegistryKey("HKCU", r"Software\Microsoft\Edge\NativeMessagingHosts\cc.isaaclin.pedelec")
    registry = FakeRegistry(
        {chrome: str(ours), chrome.in_view(RegistryView.WOW64_32): str(other), edge: str(ours)}
    )
    doctor = doc.Doctor(
        "win32", dict(env, LOCALAPPDATA=str(tmp_path / "local")), PurePath(env["HOME"]),
        registry_factory=lambda: registry, policy_registry_factory=FakePolicyRegistry,
    )  # fmt: skip
    findings = doc.diagnose(doctor, ["chrome", "edge"], [])
    by_subject = {(f.subject, f.check): f for f in findings}
    present = by_subject[("chrome", "manifest present")]
    assert present.status is doc.Status.OK
    assert present.detail.startswith(f"{chrome} (32-bit view) -> {other}")
    assert f"{chrome} -> {ours}" in present.detail  # named as shadowed
    edge_present = by_subject[("edge", "manifest present")].detail
    assert edge_present.startswith(f"{edge} (32-bit view) -> {ours}")
    assert edge_present.count(str(edge)) == 1  # not also listed as shadowing itself


def test_windows_doctor_sees_the_desktop_take_the_chrome_key_back(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Through the fake registry: install sets the keys; the Desktop's next foreground
    start points Chrome's key at its own manifest again; Edge reads its own key first."""
    home = PureWindowsPath(r"C:\Users\ann")
    win_env = dict(env, LOCALAPPDATA=str(tmp_path / "local"), PROGRAMDATA=str(tmp_path / "pd"))
    registry = FakeRegistry()
    ctx = installer.Environment(
        platform="win32", env=win_env, home=home, executable=r"C:\Python311\python.exe",
        frozen=False, registry_factory=lambda: registry, out=None,
        describe_interpreter=lambda exe, _env: interpreter.Interpreter(
            exe, r"C:\venv\Lib\site-packages", (r"C:\venv\Lib\site-packages",), None, (), {}
        ),
    )  # fmt: skip
    installer.install(installer.InstallOptions(browsers=("chrome", "edge")), ctx)
    desktop_host = str(locations.desktop_host_paths("win32", {}, home)[0])
    desktop = write_manifest(tmp_path / "desktop-files", path=desktop_host)
    chrome_key = RegistryKey(
        "HKCU", r"Software\Google\Chrome\NativeMessagingHosts\cc.isaaclin.pedelec"
    )
    registry.values[chrome_key] = str(desktop)

    doctor = doc.Doctor(
        "win32", win_env, home, timeout=5, registry_factory=lambda: registry,
        policy_registry_factory=FakePolicyRegistry,
    )  # fmt: skip
    findings = doc.diagnose(doctor, ["chrome", "edge"], [])
    which = {f.subject: f for f in findings if f.check == "host registered"}
    assert which["chrome"].status is doc.Status.WARN
    assert "Pedelec Desktop registered its own host again" in which["chrome"].detail
    assert "pedelec-native-host install --browser chrome" in which["chrome"].hint
    assert which["edge"].status is doc.Status.OK and which["edge"].detail.startswith("this host")


def test_windows_doctor_run_from_a_bundle_calls_the_msis_registration_its_own(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The MSI registers its own manifest (no install record): doctor run from that
    bundle's executable says the browser starts this very host."""
    bundle = echo_host(tmp_path / "Programs" / "pedelec-native-host")
    manifest = write_manifest(bundle.parent, path=str(bundle))
    chrome = RegistryKey("HKCU", r"Software\Google\Chrome\NativeMessagingHosts\cc.isaaclin.pedelec")
    registry = FakeRegistry({chrome: str(manifest)})

    def identity(running: Path | None) -> doc.Finding:
        doctor = doc.Doctor(
            "win32", dict(env, LOCALAPPDATA=str(tmp_path / "local")), PurePath(env["HOME"]),
            registry_factory=lambda: registry, policy_registry_factory=FakePolicyRegistry,
            bundle=running,
        )  # fmt: skip
        findings = doc.diagnose(doctor, ["chrome"], [])
        return next(f for f in findings if f.check == "host registered")

    assert identity(None).status is doc.Status.WARN  # any other program: another host
    ours = identity(bundle)
    assert ours.status is doc.Status.OK and "which runs this doctor" in ours.detail
    assert identity(tmp_path / "elsewhere" / bundle.name).status is doc.Status.WARN


def test_windows_one_registration_read_by_many_browsers_is_checked_once(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Chrome's key serves nine rows, Chromium's three: with no browser installed, doctor
    checks the first row reading each registration, not every row that would find it."""
    manifest = write_manifest(tmp_path / "m", path=str(echo_host(tmp_path / "h")))
    tail = r"NativeMessagingHosts\cc.isaaclin.pedelec"
    registry = FakeRegistry({
        RegistryKey("HKCU", rf"Software\Google\Chrome\{tail}"): str(manifest),
        RegistryKey("HKCU", rf"Software\Chromium\{tail}"): str(manifest),
    })  # fmt: skip
    local = tmp_path / "local"
    doctor = doc.Doctor(
        "win32", dict(env, LOCALAPPDATA=str(local)), PurePath(env["HOME"]),
        registry_factory=lambda: registry, policy_registry_factory=FakePolicyRegistry,
    )  # fmt: skip
    assert [row.name for row in doctor.installed_rows()] == ["chrome", "chromium"]
    # An installed browser reading the same key is checked too, by its profile.
    (local / "BraveSoftware" / "Brave-Browser" / "User Data").mkdir(parents=True)
    assert [row.name for row in doctor.installed_rows()] == ["chrome", "chromium", "brave"]
