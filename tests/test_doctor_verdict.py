"""`doctor` ends with a verdict: the first thing to fix, or "ready" (issue 32).

Black-box, as a user runs it after a real `install` in a home of the test's own: a
browser with a profile holding the official Pedelec extension, and Pedelec Desktop
closed (never opened, or opened once and closed now), or running (the dev Core).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from native_host import OFFICIAL_EXTENSION_ID
from native_host.install.doctor import verdict
from tests.support.checkout import REPO
from tests.support.markers import needs_os
from tests.support.profiles import store_entry, write_user_data

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="a Chromium profile where Linux keeps it, ~/.config/chromium"),
]

DESKTOP_DOWN_VERDICT = (
    "verdict: first fix: Pedelec Desktop is not running: start Pedelec Desktop (once it has "
    "run, the host can start it by itself) (expected while Pedelec Desktop is closed; "
    "everything else is ready)"
)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "native_host", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
        cwd=REPO, check=False,
    )  # fmt: skip


@pytest.fixture
def installed(env: dict[str, str]) -> dict[str, str]:
    """Chromium with one profile holding the official extension, and the host installed
    for it by `install` (--force: the suite runs from a source checkout)."""
    user_data = Path(env["HOME"]) / ".config" / "chromium"
    write_user_data(user_data, {"Default": {OFFICIAL_EXTENSION_ID: store_entry()}})
    done = cli(env, "install", "--force")
    assert done.returncode == 0, done.stderr
    return env


def desktop_installed(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Pedelec Desktop opened once: its `app-launch.json` names a program (one that starts
    no Core), and the host gives up waiting for it after 0.3 s."""
    program = tmp_path / "desktop" / "pedelec-app"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    home = Path(env["PEDELEC_HOME"])
    home.mkdir(exist_ok=True)
    launch = {"version": 1, "executablePath": str(program), "backgroundArgs": ["--background"]}
    (home / "app-launch.json").write_text(json.dumps(launch))
    (home / "app-launch.json").chmod(0o600)
    return {**env, "PEDELEC_LAUNCH_TIMEOUT_MS": "300"}


def test_a_clean_install_with_the_desktop_closed_names_that_one_cause(
    installed: dict[str, str],
) -> None:
    """The issue's scenario: the only problem is that the Desktop is not running. The
    verdict names it, says that is expected while it is closed, and the report says it
    once, in words: every other line it touches points at that one."""
    done = cli(installed, "doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == DESKTOP_DOWN_VERDICT
    problems = [line for line in lines[:-1] if not line.startswith("ok ")]
    said = [line for line in problems if "| symptom:" in line or "| fix:" in line]
    assert len(said) == 1 and said[0].startswith("fail  core             Core answers ping: ")
    assert "Pedelec Desktop is not running" in said[0]
    pointing = [line for line in problems if line not in said]
    assert {line.split(":")[0].split(None, 2)[2] for line in pointing} == {
        "Core through the host", "runtime.json", "app-launch.json",
    }  # fmt: skip
    for line in pointing:
        assert line.endswith("| see `core Core answers ping`") or line.endswith(
            "| same cause as `core Core answers ping`"
        ), line
    assert "pedelec-app is not running" not in done.stdout  # the wire's words

    as_json = json.loads(cli(installed, "doctor", "--json").stdout)
    assert f"verdict: {as_json['verdict']['text']}" == DESKTOP_DOWN_VERDICT
    assert as_json["verdict"] | {"text": ""} == {
        "ready": False, "text": "", "cause": "desktop-down", "subject": "core",
        "check": "Core answers ping",
        "fix": "start Pedelec Desktop (once it has run, the host can start it by itself)",
        "note": "expected while Pedelec Desktop is closed; everything else is ready",
    }  # fmt: skip
    causes = {f["check"]: f["cause"] for f in as_json["findings"] if f["status"] != "ok"}
    assert causes == {
        "Core through the host": "core-through-host", "Core answers ping": "desktop-down",
        "runtime.json": "desktop-down", "app-launch.json": "desktop-down",
    }  # fmt: skip


def test_the_desktop_opened_once_and_closed_now_is_ready_with_a_note(
    installed: dict[str, str], tmp_path: Path
) -> None:
    env = desktop_installed(installed, tmp_path)
    done = cli(env, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "verdict: ready (Pedelec Desktop is not running right now; the host starts it when "
        "a page needs it; expected while Pedelec Desktop is closed; everything else is ready)"
    )
    assert json.loads(cli(env, "doctor", "--json").stdout)["verdict"]["ready"] is True


def test_with_the_desktop_running_the_verdict_is_ready(
    installed: dict[str, str], tmp_path: Path
) -> None:
    from native_host.devcore import DevCore, DevCoreSettings

    env = desktop_installed(installed, tmp_path)
    with DevCore(DevCoreSettings(home=Path(env["PEDELEC_HOME"]))):
        done = cli(env, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "verdict: ready"
    assert [line for line in done.stdout.splitlines() if line.startswith(("warn", "fail"))] == []


def test_a_browser_not_registered_comes_first(env: dict[str, str]) -> None:
    """Nothing installed yet, the Desktop closed: first register, and the Desktop after."""
    user_data = Path(env["HOME"]) / ".config" / "chromium"
    write_user_data(user_data, {"Default": {OFFICIAL_EXTENSION_ID: store_entry()}})
    done = cli(env, "doctor")
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == (
        "verdict: first fix: the host is not registered for chromium: run "
        "`pedelec-native-host install --browser chromium` (1 other problem above)"
    )


def test_every_cause_a_doctor_module_names_is_in_the_table() -> None:
    """A finding's cause (a literal `cause=`, the seventh argument of a Finding, a
    manifest check's) must be a row of verdict.CAUSES, so it is said in words."""
    package = REPO / "native_host" / "install" / "doctor"
    named: set[str] = set()
    constants: dict[str, str] = {}
    trees = [ast.parse(p.read_text()) for p in sorted(package.glob("*.py"))]
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                        constants[target.id] = node.value.value
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            values = [k.value for k in node.keywords if k.arg == "cause"]
            if node.func.id in ("Finding", "ManifestCheck") and len(node.args) >= 7:
                values.append(node.args[6])
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    named.add(value.value)
                elif isinstance(value, ast.Name) and value.id in constants:
                    named.add(constants[value.id])
    named.discard("")
    assert named, "no cause found: the scan is broken"
    assert named - set(verdict.CAUSES) == set()
