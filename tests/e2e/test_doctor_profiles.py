"""`doctor` against profiles a real Chromium made (tests/e2e/profiles.py): the test
extension and a copy under its folder's id in `Default`; the test extension turned off
on chrome://extensions and a packed copy installed by "another program" in `Profile 1`.

doctor must name the profile of each copy, fail the copy whose id the manifest does not
allow, with the command that fixes it (and running it must make Chrome accept that copy,
which Chrome refused before), say why the disabled one is off, flag the two copies in one
profile, run while the browser is up, and write nothing into the profiles.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import harness, profiles
from tests.e2e.devtools import DevToolsBrowser
from tests.e2e.world import MISSING_IN_CI, E2EWorld
from tests.support.profiles import snapshot

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("chromium")]  # one world per module

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = "Access to the specified native messaging host is forbidden."


def doctor(world: E2EWorld) -> list[dict[str, str]]:
    """`pedelec-native-host doctor --json --user-data-dir <the world's user data dir>`."""
    done = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", "--json",
         "--user-data-dir", str(world.user_data_dir)],
        env=world.env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    findings: list[dict[str, str]] = json.loads(done.stdout)["findings"]
    return findings


def page_outcome(world: E2EWorld, browser: DevToolsBrowser, extension_id: str) -> dict[str, Any]:
    """Open the test page on the `disconnect` scenario (a ping through `extension_id`'s
    connectNative); its first report: `ping` answered, or `failed` with the error."""
    world.page.reports.clear()
    browser.open(world.page.url("disconnect", ext=extension_id))
    found = world.page.reports.wait_for(
        lambda r: r.get("from") == "page" and r.get("step") in ("ping", "failed")
    )
    assert found is not None, world.diagnostics()
    return found


@dataclass
class Made:
    profiles: profiles.MadeProfiles
    refused: dict[str, Any]
    """What the page saw through the unpacked copy before its id was allowed, and the
    `chrome.runtime.lastError` its connectNative port closed with."""
    while_running: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture(scope="module")
def made(e2e: E2EWorld) -> Iterator[Made]:
    if e2e.chromium is None:
        pytest.fail(MISSING_IN_CI, pytrace=False)
    seen: dict[str, Any] = {}
    during: list[dict[str, str]] = []

    def in_first(browser: DevToolsBrowser, unpacked_id: str) -> None:
        seen.update(page_outcome(e2e, browser, unpacked_id))
        seen["lastError"] = e2e.extension_report("native_disconnect", lambda r: True)["error"]

    made = profiles.make_profiles(
        e2e.chromium, e2e.root, e2e.env, e2e.user_data_dir, in_first,
        lambda: during.extend(doctor(e2e)),
    )  # fmt: skip
    yield Made(made, seen, during)
    assert harness.wait_until(lambda: not harness.host_pids(e2e.state_dir))


def lines(findings: list[dict[str, str]], check: str, *words: str) -> list[dict[str, str]]:
    return [f for f in findings if f["check"] == check and all(w in f["detail"] for w in words)]


def test_doctor_reports_each_copy_in_the_profile_that_has_it(e2e: E2EWorld, made: Made) -> None:
    state = json.loads((e2e.user_data_dir / "Local State").read_text())
    named = {d: f'{d} ("{v["name"]}")' for d, v in state["profile"]["info_cache"].items()}
    first, second = f"profile {named['Default']}", f"profile {named['Profile 1']}"
    unpacked_id, packed_id = made.profiles.unpacked_copy_id, made.profiles.packed_copy_id

    before = snapshot(e2e.user_data_dir)
    findings = doctor(e2e)
    assert snapshot(e2e.user_data_dir) == before  # not a byte, a mode or a time changed

    (listed,) = lines(findings, "profiles")
    assert listed["detail"] == f"2 in Local State: {named['Default']}, {named['Profile 1']}"
    (allowed,) = lines(findings, "extension", first, harness.EXTENSION_ID)
    assert allowed["status"] == "ok"
    assert (
        f"(unpacked from {harness.EXTENSION_DIR}, --load-extension), enabled;" in allowed["detail"]
    )
    (copy,) = lines(findings, "extension", first, unpacked_id)
    assert copy["status"] == "fail"
    assert copy["detail"] == (
        f"{first}: {profiles.UNPACKED_NAME} 1.0 {unpacked_id} (unpacked from "
        f"{made.profiles.unpacked_copy}, --load-extension), enabled, but allowed_origins "
        "does not list it"
    )
    assert copy["symptom"] == f'"{FORBIDDEN}"'  # what the browser said:
    assert made.refused["step"] == "failed" and made.refused["lastError"] == FORBIDDEN
    fix = f"pedelec-native-host install --user-data-dir {e2e.user_data_dir} --extension-id "
    assert copy["hint"] == f"run `{fix}{unpacked_id}`"
    (both,) = lines(findings, "extension copies", first, harness.EXTENSION_ID, unpacked_id)
    assert both["status"] == "warn"

    (off,) = lines(findings, "extension", second, harness.EXTENSION_ID)
    assert off["status"] == "warn"
    assert off["detail"].endswith("disabled: turned off by the user")
    assert off["hint"] == "turn it on at chrome://extensions in that profile"
    (packed,) = lines(findings, "extension", second, packed_id)
    assert packed["status"] == "fail"
    assert (
        f"{profiles.PACKED_NAME} 1.0 {packed_id} (installed by another program)" in packed["detail"]
    )
    assert lines(findings, "extension copies", second) == []  # one of its two is off
    assert lines(findings, "extension", "no Pedelec extension") == []
    assert lines(findings, "profile files") == []


def test_doctor_runs_while_the_browser_is_up(made: Made) -> None:
    """Run during the second browser run: the first profile, saved when its browser
    closed, reads the same."""
    (copy,) = lines(made.while_running, "extension", made.profiles.unpacked_copy_id)
    assert copy["status"] == "fail"
    assert lines(made.while_running, "profiles")[0]["status"] == "ok"


def test_the_command_doctor_prints_makes_chrome_accept_the_copy(e2e: E2EWorld, made: Made) -> None:
    """Chrome refused the unpacked copy's connectNative; after the printed command (and a
    browser start, as for any manifest change) its ping is answered."""
    unpacked_id = made.profiles.unpacked_copy_id
    (copy,) = lines(doctor(e2e), "extension", unpacked_id)
    command = copy["hint"].removeprefix("run `").removesuffix("`").split()
    assert command[0] == "pedelec-native-host"
    # --force: this suite's host is a checkout, which install rightly calls a location
    # that would not last for a real user (tests/e2e/world.py does the same)
    fix = [sys.executable, "-m", "native_host", *command[1:], "--force"]
    done = subprocess.run(fix, env=e2e.env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    (copy,) = lines(doctor(e2e), "extension", unpacked_id)
    assert copy["status"] == "ok"

    browser = profiles.first_profile(
        str(e2e.chromium), e2e.env, e2e.user_data_dir, made.profiles.unpacked_copy,
        e2e.root / "chromium-after-the-fix.log",
    )  # fmt: skip
    try:
        answered = page_outcome(e2e, browser, unpacked_id)
    finally:
        browser.close()
    assert answered["step"] == "ping", answered
    assert answered["response"]["ok"] is True
