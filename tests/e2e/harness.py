"""Real headless Chromium for the end-to-end tests: the flags, the browser process, the
test's HTTP server (page + reports) and the host processes the browser starts.

Everything here is about the browser side; the host and the dev Core are the package's own.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

E2E_DIR = Path(__file__).resolve().parent
EXTENSION_DIR = E2E_DIR / "extension"
PAGE_DIR = E2E_DIR / "page"

EXTENSION_ID = "nclpdgnihocjpkhdkjhmedcalobhcfee"
"""The test extension's id, from the `key` in extension/manifest.json."""

CHROMIUM_NAMES = ("chromium", "chromium-browser")

CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless=new",  # no display here
    "--no-sandbox",  # required when running as root
    "--disable-gpu",
    # The browser must not need the network: these stop it reaching out to Google hosts.
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Flags for every e2e browser; `--user-data-dir`, `--load-extension` and the URL are added
per run (see `chromium_command` and docs/e2e.md)."""

STEP_TIMEOUT = 30.0
"""Bound on every wait for the browser, the page, the extension or a host process."""


def extension_id_from_key(key_b64: str) -> str:
    """Chromium's id for a manifest `key`: sha256 of the DER public key, 32 hex digits a-p."""
    digest = hashlib.sha256(base64.b64decode(key_b64)).hexdigest()[:32]
    return "".join(chr(ord("a") + int(c, 16)) for c in digest)


def find_chromium() -> str | None:
    """The Chromium executable on PATH, if any."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_version(executable: str) -> str:
    """`chromium --version`, without the Debian wrapper's noise."""
    done = subprocess.run(
        [executable, "--version"], capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"unknown ({done.stderr.strip()})"


def chromium_command(executable: str, user_data_dir: Path, url: str) -> list[str]:
    """The full browser command line for one run."""
    return [
        executable,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={user_data_dir}",
        f"--load-extension={EXTENSION_DIR}",
        url,
    ]


def browser_env(env: Mapping[str, str], root: Path) -> dict[str, str]:
    """`env` plus TMPDIR and XDG dirs under `root`, so the browser leaves nothing behind."""
    dirs = {"TMPDIR": root / "tmp", "XDG_CONFIG_HOME": root / "xdg-config"}
    dirs["XDG_CACHE_HOME"] = root / "xdg-cache"
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    return {**env, **{k: str(v) for k, v in dirs.items()}}


def wait_until(predicate: Callable[[], bool], timeout: float = STEP_TIMEOUT) -> bool:
    """Poll `predicate` until true or `timeout`; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# --- the test's HTTP server -------------------------------------------------------------------


class Reports:
    """Reports POSTed by the page and the extension, in arrival order."""

    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def add(self, report: dict[str, Any]) -> None:
        with self._cond:
            self._items.append(report)
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._items.clear()

    def all(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._items)

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = STEP_TIMEOUT
    ) -> dict[str, Any] | None:
        """The first report matching `predicate`, waiting up to `timeout`; None if none."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for item in self._items:
                    if predicate(item):
                        return item
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)


class PageServer:
    """Serves page/ on http://localhost:<port>/ and collects POST /report bodies.

    The same port takes the extension's reports at http://127.0.0.1:<port>/report.
    """

    def __init__(self) -> None:
        self.reports = Reports()
        reports = self.reports

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.split("?", 1)[0].lstrip("/") or "index.html"
                path = PAGE_DIR / name
                if "/" in name or not path.is_file():
                    self.send_error(404)
                    return
                kind = "text/html" if name.endswith(".html") else "text/javascript"
                self._reply(200, path.read_bytes(), f"{kind}; charset=utf-8")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    report = json.loads(body)
                except ValueError:
                    report = {"from": "?", "unparsable": body[:200].decode("utf-8", "replace")}
                reports.add(report)
                self._reply(204, b"")

            def do_OPTIONS(self) -> None:
                self._reply(204, b"")

            def _reply(self, status: int, body: bytes, kind: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Headers", "*")
                self.send_header("Cache-Control", "no-store")
                if body:
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                try:
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the browser was closed once the page's report was in

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.origin = f"http://localhost:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, scenario: str, **extra: str) -> str:
        """The page URL that runs `scenario` (with `extra` parameters) through the test
        extension."""
        query = urlencode({"scenario": scenario, "ext": EXTENSION_ID, "report": self.port, **extra})
        return f"{self.origin}/?{query}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


# --- processes --------------------------------------------------------------------------------


def _read_proc(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def _pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie."""
    stat = _read_proc(pid, "stat")
    return bool(stat) and stat.rsplit(b")", 1)[-1].split()[0] != b"Z"


def host_pids(state_dir: Path) -> list[int]:
    """Live host processes of this test world: `native_host` and `chrome-extension://<id>/`
    in the command line (the launcher is `python -IS <launcher> <origin>` by its `#!`
    line, or `python -I -c '...native_host...' <origin>`) and this world's
    PEDELEC_NATIVE_HOST_STATE_DIR in the environment."""
    marker = f"PEDELEC_NATIVE_HOST_STATE_DIR={state_dir}".encode()
    origin = f"chrome-extension://{EXTENSION_ID}/".encode()
    found = []
    for pid in _pids():
        argv = _read_proc(pid, "cmdline").split(b"\0")
        named = any(b"native_host" in arg or b"pedelec-native-host" in arg for arg in argv)
        if not named or origin not in argv or not _alive(pid):
            continue
        if marker in _read_proc(pid, "environ").split(b"\0"):
            found.append(pid)
    return sorted(found)


def pids_with_arg(argument: str) -> list[int]:
    """Live processes with `argument` in their command line (e.g. a --user-data-dir flag)."""
    needle = argument.encode()
    return [p for p in _pids() if needle in _read_proc(p, "cmdline").split(b"\0") and _alive(p)]


_START = re.compile(r" (\d+) INFO native_host\S*: start pid=(\d+) .*extension=(\S+)")
_EXIT = re.compile(r" (\d+) INFO native_host\S*: exit status=(\d+)")


def host_log(log_dir: Path) -> tuple[list[int], dict[int, int]]:
    """Host pids in start order and the exit status each logged, from the host's log."""
    starts: list[int] = []
    exits: dict[int, int] = {}
    for path in sorted(log_dir.glob("*.log*")):
        for line in path.read_text(errors="replace").splitlines():
            if match := _START.search(line):
                starts.append(int(match.group(2)))
            elif match := _EXIT.search(line):
                exits[int(match.group(1))] = int(match.group(2))
    return starts, exits


class Browser:
    """One headless Chromium run in its own session (process group), output to a file."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], log_path: Path) -> None:
        self.command = list(command)
        self.user_data_arg = next(a for a in command if a.startswith("--user-data-dir="))
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,
            )

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def stop(self) -> None:
        """Kill the browser's process group, then any of its processes that left it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(STEP_TIMEOUT)
        for pid in pids_with_arg(self.user_data_arg):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
