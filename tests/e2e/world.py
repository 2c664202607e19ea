"""The world of one e2e module: directories, the dev Core, the host registered for the
test extension, the page server, and one browser at a time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from native_host.devcore import DevCore, DevCoreSettings
from native_host.hostproc import isolated_env
from tests.e2e import harness
from tests.e2e.harness import STEP_TIMEOUT, Browser, PageServer

MISSING_IN_CI = (
    "CI=true but no chromium executable on PATH: the real-browser e2e tests must run in CI "
    "(install it with `apt-get install -y chromium`)"
)


class E2EWorld:
    """Directories, the dev Core, the registered host and the page server of one module."""

    def __init__(self, chromium: str | None, root: Path) -> None:
        self.chromium = chromium
        self.root = root
        self.env = harness.browser_env(isolated_env(os.environ, root), root)
        self.home = Path(self.env["PEDELEC_HOME"])
        self.state_dir = Path(self.env["PEDELEC_NATIVE_HOST_STATE_DIR"])
        self.log_dir = Path(self.env["PEDELEC_NATIVE_HOST_LOG_DIR"])
        self.user_data_dir = root / "chromium-profile"
        self.home.mkdir(parents=True)
        self.core = DevCore(DevCoreSettings(home=self.home, generation="current"))
        self.server: PageServer | None = None
        self.browser: Browser | None = None
        self.runs = 0
        self._starts_before = 0

    def setup(self) -> None:
        """Start the dev Core and the page server; register the host for the test extension."""
        self.core.start()
        self.server = PageServer()
        # --force: the host under test is this checkout, which install rightly calls a
        # location that would not last for a real user
        command = [sys.executable, "-m", "native_host", "install", "--force"]
        command += ["--user-data-dir", str(self.user_data_dir)]
        command += ["--extension-id", harness.EXTENSION_ID]
        done = subprocess.run(
            command,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
        )
        assert done.returncode == 0, f"install failed:\n{done.stdout}\n{done.stderr}"
        manifest = json.loads(self.manifest_path.read_text())
        assert f"chrome-extension://{harness.EXTENSION_ID}/" in manifest["allowed_origins"]

    @property
    def manifest_path(self) -> Path:
        return self.user_data_dir / "NativeMessagingHosts" / "cc.isaaclin.pedelec.json"

    @property
    def page(self) -> PageServer:
        assert self.server is not None
        return self.server

    def start_browser(self, scenario: str, **extra: str) -> Browser:
        """Start Chromium on the page that runs `scenario`; reports start empty."""
        if self.chromium is None:
            pytest.fail(MISSING_IN_CI, pytrace=False)
        assert self.browser is None, "one browser at a time"
        self.runs += 1
        self.page.reports.clear()
        self._starts_before = len(harness.host_log(self.log_dir)[0])
        command = harness.chromium_command(
            self.chromium, self.user_data_dir, self.page.url(scenario, **extra)
        )
        log_path = self.root / f"chromium-{self.runs}-{scenario}.log"
        self.browser = Browser(command, self.env, log_path)
        return self.browser

    def stop_browser(self) -> list[int]:
        """Kill the browser; returns host pids that outlived it by STEP_TIMEOUT (then killed)."""
        if self.browser is None:
            return []
        self.browser.stop()
        self.browser = None
        harness.wait_until(lambda: not harness.host_pids(self.state_dir))
        leftovers = harness.host_pids(self.state_dir)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return leftovers

    def diagnostics(self) -> str:
        """What to show when a wait fails: reports, browser output, host log."""
        reports = "\n".join(json.dumps(r)[:600] for r in self.page.reports.all())
        host_log = "".join(p.read_text() for p in sorted(self.log_dir.glob("*.log*")))
        browser = self.browser.log_tail() if self.browser else ""
        return (
            f"--- reports\n{reports}\n--- browser output (tail)\n{browser}\n"
            f"--- host log (tail)\n{host_log[-3000:]}"
        )

    def step(self, name: str, timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
        """Wait for the page's report of step `name` (fail at once if the page failed)."""
        deadline = time.monotonic() + timeout
        while True:  # in slices, to notice a browser that died
            found = self.page.reports.wait_for(
                lambda r: r.get("from") == "page" and r.get("step") in (name, "failed"),
                min(1.0, max(0.0, deadline - time.monotonic())),
            )
            if found is not None or time.monotonic() >= deadline:
                break
            if self.browser is not None and self.browser.proc.poll() is not None:
                code = self.browser.proc.returncode
                pytest.fail(f"the browser exited ({code}) before {name!r}\n{self.diagnostics()}")
        if found is None:
            pytest.fail(f"no page report {name!r} within {timeout} s\n{self.diagnostics()}")
        if found["step"] == "failed":
            pytest.fail(f"page failed before {name!r}: {found['error']}\n{self.diagnostics()}")
        return found

    def host_starts(self) -> list[int]:
        """Pids of the hosts started since this run's browser started, from the host log."""
        return harness.host_log(self.log_dir)[0][self._starts_before :]

    def host_exit_status(self, pid: int) -> int | None:
        """The exit status host `pid` logged, if it has."""
        return harness.host_log(self.log_dir)[1].get(pid)

    def extension_report(
        self, event: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = STEP_TIMEOUT
    ) -> dict[str, Any]:
        """Wait for the extension's report of kind `event` matching `predicate`."""
        found = self.page.reports.wait_for(
            lambda r: r.get("from") == "extension" and r.get("event") == event and predicate(r),
            timeout,
        )
        if found is None:
            pytest.fail(f"no matching extension report {event!r}\n{self.diagnostics()}")
        return found

    def extension_reports(self, event: str) -> list[dict[str, Any]]:
        """The extension's reports of one kind, in order."""
        return [
            r
            for r in self.page.reports.all()
            if r.get("from") == "extension" and r.get("event") == event
        ]

    def close(self) -> None:
        self.stop_browser()
        if self.server is not None:
            self.server.close()
        self.core.stop()
