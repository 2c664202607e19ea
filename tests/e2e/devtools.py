"""Headless Chromium driven through the DevTools protocol over `--remote-debugging-pipe`
(the browser reads commands on fd 3 and writes answers on fd 4, each a JSON text ended by
a NUL byte): no WebSocket client needed.

What the profile tests need of it: open `chrome://extensions` and act there as the user
does with its toggles (`chrome.management`, which that page may use on any extension),
and close the browser with `Browser.close`, a clean shutdown that writes the profile's
`Preferences` (a SIGKILL can lose the last seconds of changes). Verified with Debian's
Chromium 156.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.e2e import harness
from tests.e2e.harness import STEP_TIMEOUT

EXTENSIONS_PAGE = "chrome://extensions"
_READY = "location.href.startsWith('chrome://extensions') && !!(window.chrome && chrome.management)"


class DevToolsError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class DevToolsBrowser:
    """One headless Chromium on one profile of a user data dir, under DevTools control."""

    def __init__(
        self,
        executable: str,
        user_data_dir: Path,
        env: Mapping[str, str],
        log_path: Path,
        profile_directory: str = "Default",
        extensions: Sequence[Path] = (),
    ) -> None:
        self.user_data_arg = f"--user-data-dir={user_data_dir}"
        command = [
            executable,
            *harness.CHROMIUM_FLAGS,
            self.user_data_arg,
            f"--profile-directory={profile_directory}",
            "--remote-debugging-pipe",
        ]
        if extensions:
            command.append("--load-extension=" + ",".join(str(e) for e in extensions))
        command.append("about:blank")
        import fcntl  # POSIX only: imported here, so the module imports anywhere

        commands_in, self._commands = os.pipe()
        self._answers, answers_out = os.pipe()

        def to_fds_3_and_4() -> None:
            # through fds out of the way first: either pipe end may itself be 3 or 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_in, answers_out)]
            for target, fd in zip((3, 4), high, strict=True):
                os.dup2(fd, target)

        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                pass_fds=(3, 4),  # kept open: preexec_fn runs before the others close
                preexec_fn=to_fds_3_and_4,
                start_new_session=True,
            )
        os.close(commands_in)
        os.close(answers_out)
        self._buffer = b""
        self._next_id = 0
        self._closed = False

    def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        session: str | None = None,
        timeout: float = STEP_TIMEOUT,
    ) -> dict[str, Any]:
        """Send one command and return its `result` (events in between are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                line, self._buffer = self._buffer.split(b"\0", 1)
                answer = json.loads(line)
                if answer.get("id") != self._next_id:
                    continue
                if "error" in answer:
                    raise DevToolsError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self._answers], [], [], max(0.0, remaining))
            if not readable:
                raise DevToolsError(f"{method}: no answer within {timeout} s")
            chunk = os.read(self._answers, 65536)
            if not chunk:
                raise DevToolsError(f"{method}: the browser closed the pipe")
            self._buffer += chunk

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited) in a page."""
        params = {"expression": expression, "awaitPromise": True, "returnByValue": True}
        result = self.call("Runtime.evaluate", params, session)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> str:
        """Open `url` in a new tab; its target id."""
        target: str = self.call("Target.createTarget", {"url": url})["targetId"]
        return target

    def extensions_page(self) -> str:
        """Open chrome://extensions and wait until its `chrome.management` is there."""
        target = self.open(EXTENSIONS_PAGE)
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        session: str = attached["sessionId"]
        ready = harness.wait_until(lambda: self.evaluate(session, _READY) is True)
        if not ready:
            raise DevToolsError(f"{EXTENSIONS_PAGE} never offered chrome.management")
        return session

    def installed(self, session: str) -> list[dict[str, Any]]:
        """Every extension the profile has, as chrome://extensions sees it."""
        code = "new Promise(done => chrome.management.getAll(done))"
        found: list[dict[str, Any]] = self.evaluate(session, code)
        return found

    def set_enabled(self, session: str, extension_id: str, enabled: bool) -> None:
        """What the page's toggle does: `chrome.management.setEnabled`."""
        code = (
            f"new Promise(done => chrome.management.setEnabled({json.dumps(extension_id)}, "
            f"{json.dumps(enabled)}, () => done(chrome.runtime.lastError "
            "? chrome.runtime.lastError.message : 'ok')))"
        )
        outcome = self.evaluate(session, code)
        if outcome != "ok":
            raise DevToolsError(f"setEnabled({extension_id}, {enabled}): {outcome}")

    def close(self) -> None:
        """`Browser.close` (a clean exit that saves the profile), then make sure no
        process of this browser is left."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(DevToolsError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STEP_TIMEOUT)
        for pid in harness.pids_with_arg(self.user_data_arg):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for fd in (self._commands, self._answers):
            with contextlib.suppress(OSError):
                os.close(fd)
