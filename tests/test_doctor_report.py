"""`doctor --report FILE`: one file for a bug report, with nothing private in it
(issue 32).

Secrets are planted where a user's machine has them: in the host's log (a host run at
trace level, which logs bodies: a prompt, a tool's arguments, a ticket token), in the
environment (an API key, a setting's value, extra extension ids), in `config.json` (a
key the host does not know, and a real one) and in the home's paths. The report must
hold what a maintainer needs and none of them; and it is written safely.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from native_host import OFFICIAL_EXTENSION_ID, __version__
from native_host.hostproc import HostProcess
from tests.support.checkout import REPO
from tests.support.markers import needs_os
from tests.support.profiles import store_entry, write_user_data

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="a Chromium profile where Linux keeps it, ~/.config/chromium"),
]

OTHER_ID = "kbkiopeinddijhonphlcmogbngjhaeac"
PROMPT = "PROMPT-summarise my medical letter 7731"
TOOL_ARGUMENT = "TOOLARG-account 4417 0000 1234"
TOKEN = "TOKEN-3f9c2a71e8d04b6c"
API_KEY = "sk-ant-api03-SECRETKEYFORTESTS00042"
SETTING_SECRET = "SETTING-hunter2-passphrase"
CONFIG_SECRET = "CONFIG-opensesame-passphrase-99"
SECRETS = (PROMPT, TOOL_ARGUMENT, TOKEN, API_KEY, SETTING_SECRET, CONFIG_SECRET)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "native_host", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
        cwd=REPO, check=False,
    )  # fmt: skip


def plant_trace_log(env: dict[str, str]) -> Path:
    """A host run at trace level, sent a prompt, a tool's result and a ticket token: its
    log holds the bodies (what the report must leave out)."""
    host = HostProcess(env={**env, "PEDELEC_NATIVE_HOST_LOG": "trace"})
    try:
        for request in (
            {"type": "send_text", "requestId": "r1", "threadId": "t1", "message": PROMPT,
             "callerOrigin": "https://app.example.com"},
            {"type": "submit_tool_result", "requestId": "r2", "threadId": "t1",
             "toolRequestId": "x", "result": {"args": TOOL_ARGUMENT, "token": TOKEN},
             "callerOrigin": "https://app.example.com"},
        ):  # fmt: skip
            host.request(request, timeout=30)
    finally:
        host.stop(5)
    log = Path(env["PEDELEC_NATIVE_HOST_LOG_DIR"]) / "pedelec-native-host.log"
    text = log.read_text()
    assert PROMPT in text and TOOL_ARGUMENT in text, "the trace log holds no body: nothing planted"
    return log


@pytest.fixture
def machine(env: dict[str, str]) -> dict[str, str]:
    """A user's machine: Chromium with Pedelec, the host installed with another id too,
    a trace log, and secrets in the environment and in config.json."""
    user_data = Path(env["HOME"]) / ".config" / "chromium"
    write_user_data(user_data, {"Default": {OFFICIAL_EXTENSION_ID: store_entry()}})
    done = cli(env, "install", "--force", "--extension-id", OTHER_ID)
    assert done.returncode == 0, done.stderr
    config = Path(env["PEDELEC_NATIVE_HOST_CONFIG_DIR"]) / "config.json"
    data = json.loads(config.read_text()) | {"apiToken": CONFIG_SECRET, "logLevel": "trace"}
    config.write_text(json.dumps(data))
    plant_trace_log(env)
    return {
        **env,
        "ANTHROPIC_API_KEY": API_KEY,
        "PEDELEC_CONNECT_TIMEOUT_MS": SETTING_SECRET,
        "PEDELEC_ALLOWED_EXTENSION_IDS": f"{OTHER_ID},{SETTING_SECRET}x",
    }


def test_the_report_holds_what_a_maintainer_needs_and_nothing_private(
    machine: dict[str, str], tmp_path: Path
) -> None:
    report = tmp_path / "report.txt"
    done = cli(machine, "doctor", "--report", str(report))
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr.strip() == f"report written to {report}: attach it to your bug report"
    assert report.stat().st_mode & 0o777 == 0o600
    text = report.read_text()
    for secret in SECRETS:
        assert secret not in text, secret
    assert OTHER_ID not in text and "<extension id 1>" in text
    assert OFFICIAL_EXTENSION_ID in text
    assert machine["HOME"] not in text and os.path.realpath(machine["HOME"]) not in text
    # XDG_CONFIG_HOME is set (to ~/.config): a path under it names the variable.
    assert "$XDG_CONFIG_HOME/chromium/NativeMessagingHosts/cc.isaaclin.pedelec.json" in text
    assert "$PEDELEC_HOME/runtime.json" in text
    assert str(tmp_path) not in text  # every folder of the test's is named by its variable
    for section in ("## Versions", "## Findings and verdict", "## Registrations and their "
                    "manifests", "## Install record", "## Settings", "## Host log"):  # fmt: skip
        assert section in text, section
    assert f"pedelec-native-host {__version__}" in text
    assert f"Python {sys.version_info[0]}.{sys.version_info[1]}" in text
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("verdict: ")], "no verdict"
    assert '"allowed_origins": [' in text  # the manifest itself
    assert any(" INFO native_host.relay: start pid=" in line for line in lines)
    assert not any(" TRACE " in line or " DEBUG " in line for line in lines)
    assert "environment: " in text and "PEDELEC_CONNECT_TIMEOUT_MS" in text
    assert "$PEDELEC_CONNECT_TIMEOUT_MS" in text  # the problem quoting it names the variable


def test_the_json_report_on_stdout_stays_json(machine: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    done = cli(machine, "doctor", "--json", "--report", str(report))
    assert json.loads(done.stdout)["verdict"]["text"]
    assert report.is_file()


def test_a_symbolic_link_planted_at_the_reports_name_is_refused(
    env: dict[str, str], tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    planted = tmp_path / "report.txt"
    planted.symlink_to(victim)
    done = cli(env, "doctor", "--report", str(planted))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"pedelec-native-host doctor: error: no report written: {planted} is a symbolic link "
        "(refused: it could point anywhere)"
    )
    assert "Traceback" not in done.stderr
    assert victim.read_text() == "keep me\n"
    assert planted.is_symlink() and os.readlink(planted) == str(victim)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report")) == []


def test_a_folder_at_the_reports_name_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "report.txt").mkdir()
    done = cli(env, "doctor", "--report", str(tmp_path / "report.txt"))
    assert done.returncode == 1
    assert "exists and is not a regular file" in done.stderr.splitlines()[-1]


def test_an_earlier_report_is_replaced_whole(env: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    report.write_text("an old report\n" * 10_000)
    report.chmod(0o644)
    done = cli(env, "doctor", "--report", str(report))
    assert done.returncode in (0, 1), done.stderr
    assert report.read_text().startswith("# pedelec-native-host doctor report\n")
    assert "an old report" not in report.read_text()
    assert report.stat().st_mode & 0o777 == 0o600


def test_paths_under_the_home_read_tilde(tmp_path: Path) -> None:
    """A user's usual environment: only HOME says where things are."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)}
    report = tmp_path / "report.txt"
    done = cli(env, "doctor", "--report", str(report))
    assert done.returncode in (0, 1), done.stderr
    text = report.read_text()
    assert str(home) not in text
    assert "~/.pedelec/runtime.json" in text
    assert "config.json: ~/.config/pedelec-native-host/config.json (absent)" in text
