"""connectNative -> ping answered, through real headless Chromium, with the e2e harness.

The world (dev Core, page server, test extension, profile) is the e2e tests' `E2EWorld`
and the browser is the harness's `Browser` with its flags, plus `--remote-debugging-port`
so that one warm browser can open one tab per measurement (`PUT /json/new`; plain HTTP,
no DevTools protocol). Only the manifest's `path` changes between measurements (Chromium
reads the manifest on every `connectNative`), so every variant is started by the same
browser, extension and page.

Each tab runs the page's `reconnect` scenario: connectNative, ping, disconnect,
connectNative, ping. Times are taken where the test extension's reports arrive at the
page server: from its `native_connect` report (sent right after `connectNative`
returned) to its `native_message` report of the ping's response (sent when the response
reached the extension). Both are the same kind of fetch from the same service worker, so
their transport delay cancels to about a millisecond. The second connect of a tab is the
figure; the first is kept in the JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench.builds import registered_path
from tests.e2e import harness
from tests.e2e.conftest import E2EWorld

SCENARIO = "reconnect"
DEVTOOLS_TIMEOUT_S = 30.0
HOST_EXIT_TIMEOUT_S = 10.0

FAILED = pytest.fail.Exception
"""What the harness raises when the page, browser or extension fails (a BaseException)."""


class BrowserBench:
    """One E2EWorld and one browser, reused for every measurement.

    The world is set up as `E2EWorld.setup` does, except that
    - the host registered is the wheel-installed one given here, not the checkout;
    - the host finds its dirs as for users (platformdirs, under HOME=<root>/home), not
      through the PEDELEC_NATIVE_HOST_*_DIR overrides the tests use;
    - the test extension is allowed through the environment (PEDELEC_ALLOWED_EXTENSION_IDS)
      and the manifest rather than `install --extension-id`: that writes a `config.json`,
      and a host that finds one imports pydantic to read it, which users of the official
      extension (no config file) never pay (`run.py` measures that case separately).
    """

    def __init__(self, chromium: str, root: Path, installed_host: Path) -> None:
        self.world = E2EWorld(chromium, root)
        self.home = self._user_like(self.world.env, root)
        try:
            self._start(chromium, root, installed_host)
        except BaseException:
            self.world.close()  # no browser, server or Core left behind by a failed start
            raise

    def _start(self, chromium: str, root: Path, installed_host: Path) -> None:
        self.world.core.start()
        self.world.server = harness.PageServer()
        self.launcher = registered_path(installed_host, self.world.env, self.world.user_data_dir)
        self.manifest = json.loads(self.world.manifest_path.read_text())
        self.manifest["allowed_origins"].append(f"chrome-extension://{harness.EXTENSION_ID}/")
        self.arrivals: list[tuple[float, dict[str, Any]]] = []
        reports = self.world.page.reports
        keep = reports.add

        def add_with_time(report: dict[str, Any]) -> None:
            self.arrivals.append((time.perf_counter(), report))
            keep(report)

        # The harness's Reports keeps no arrival times: wrap `add` on this instance only.
        reports.add = add_with_time  # type: ignore[method-assign]
        command = harness.chromium_command(chromium, self.world.user_data_dir, "about:blank")
        command.insert(-1, "--remote-debugging-port=0")
        self.world.browser = harness.Browser(command, self.world.env, root / "chromium.log")
        self.devtools = self._devtools_endpoint()
        self.browser_exe = os.path.realpath(f"/proc/{self.world.browser.proc.pid}/exe")

    @staticmethod
    def _user_like(env: dict[str, str], root: Path) -> Path:
        """Drop the dir overrides from the world's environment; HOME and the runtime dir
        move under `root`. Returns the HOME."""
        for name in [k for k in env if k.startswith("PEDELEC_NATIVE_HOST_")]:
            del env[name]
        home, runtime = root / "home", root / "run"
        home.mkdir()
        runtime.mkdir(mode=0o700)
        env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
        env["PEDELEC_ALLOWED_EXTENSION_IDS"] = harness.EXTENSION_ID
        return home

    def _devtools_endpoint(self) -> str:
        """http://127.0.0.1:<port>, from the DevToolsActivePort file the browser writes."""
        active = self.world.user_data_dir / "DevToolsActivePort"
        if not harness.wait_until(active.is_file, DEVTOOLS_TIMEOUT_S):
            raise RuntimeError(f"no DevToolsActivePort:\n{self._browser_log()}")
        port = active.read_text().split()[0]
        return f"http://127.0.0.1:{port}"

    def _browser_log(self) -> str:
        return self.world.browser.log_tail() if self.world.browser else ""

    def _devtools(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.devtools + path, method=method)
        with urllib.request.urlopen(request, timeout=DEVTOOLS_TIMEOUT_S) as reply:
            body = reply.read()
        return json.loads(body) if body.startswith((b"{", b"[")) else body

    def connect_to_ping(self, host_path: str) -> tuple[float, float]:
        """Seconds from connectNative to the ping's answer, in one new tab: (first, second)."""
        self.manifest["path"] = host_path
        self.world.manifest_path.write_text(json.dumps(self.manifest, indent=2))
        self.world.page.reports.clear()
        self.arrivals.clear()
        url = urllib.parse.quote(self.world.page.url(SCENARIO), safe="")
        tab = self._devtools(f"/json/new?{url}", method="PUT")
        try:
            for step in ("first_ping", "second_ping"):
                response = self.world.step(step)["response"]
                if response.get("ok") is not True:
                    raise RuntimeError(f"{host_path}: ping failed in the browser: {response}")
            self.world.step("done")  # the page's last report: closing now cuts no fetch short
            return self._intervals()
        finally:
            self._devtools(f"/json/close/{tab['id']}")
            self._wait_hosts_gone()

    def _intervals(self) -> tuple[float, float]:
        connects: list[float] = []
        answers: list[float] = []
        for at, report in list(self.arrivals):
            if report.get("from") != "extension":
                continue
            if report.get("event") == "native_connect":
                connects.append(at)
            elif report.get("event") == "native_message" and _is_ping_answer(report):
                answers.append(at)
        if len(connects) < 2 or len(answers) < 2:
            raise RuntimeError(f"incomplete reports: {len(connects)} connects, {answers=}")
        return answers[0] - connects[0], answers[1] - connects[1]

    def _wait_hosts_gone(self) -> None:
        """Closing the tab disconnects its port: wait for the host to exit (or kill it), so
        that no exiting host competes with the next start."""
        if not harness.wait_until(lambda: not self.hosts(), HOST_EXIT_TIMEOUT_S):
            for pid in self.hosts():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def hosts(self) -> list[int]:
        """Live host processes of this world, whatever their kind: processes whose
        environment has this world's HOME, other than the browser's own (which all run
        the browser's executable)."""
        marker = f"HOME={self.home}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                if stat.rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue
                if os.path.realpath(f"/proc/{entry}/exe") == self.browser_exe:
                    continue
                if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
        return found

    def close(self) -> None:
        """Kill the browser and every host, stop the page server and the Core."""
        self.world.stop_browser()
        self._wait_hosts_gone()
        self.world.close()


def _is_ping_answer(report: dict[str, Any]) -> bool:
    message = report.get("message") or {}
    return bool(message.get("type") == "response" and message.get("ok") is True)
