"""Three hosts that keep serving while what they were started from is upgraded under them,
and through a Core restart after it (issue 30).

Before the upgrade each host is in one state a user's hosts are in: one is mid-stream (a
subscribed thread whose turn's events the Core holds back until after the upgrade), one
has a request in flight (held at the Core's gate), one is idle. None of them has yet
used the origin policy, an internationalised origin, the Desktop's launch or a second
subscription: each first use comes after the upgrade, when a host that read code from
disk would load the new version's modules into the old one's process. After the
upgrade every host answers every request type the host knows (the 24 relay types and
the 3 host-local ones) from an internationalised page, then the Core dies, the next
request of each host starts Pedelec Desktop (a fake one that runs the dev Core), and
every host answers every request type again. A host started afterwards runs the new
version.

The dev Core runs in the test's process; the Desktop's Core is the dev Core of the
interpreter running the tests (tests/launch_support/fake_desktop.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from native_host import errors
from native_host.devcore import DevCore, DevCoreSettings, Faults
from native_host.hostproc import OFFICIAL_ORIGIN, HostProcess, isolated_env
from tests.support.checkout import REPO

PAGE_ORIGIN = "https://b\u00fccher.example"
"""The page of every request after the upgrade: an internationalised name, so the IDNA
code is first needed then."""
APPROVED_ORIGIN = "https://stra\u00dfe.example"
TOOL_NAME = "update_counter"
TOOL_MESSAGE = f'/tool {TOOL_NAME} {{"delta":2}}'
SKILLS = {
    "guidance": "Call update_counter.",
    "tools": [{"name": TOOL_NAME, "description": "Add delta", "argsSchema": {"type": "object"}}],
}
FAKE_DESKTOP = (REPO / "tests" / "launch_support" / "fake_desktop.py").read_text()
ANSWER_TIMEOUT_S = 30.0
LAUNCH_TIMEOUT_S = 60.0
START_LINE = re.compile(r" start pid=(\d+) version=(\S+) extension=\S+ image=(\S+)")

Frame = dict[str, Any]


def _thread_event(frame: Frame, thread_id: str, event_type: str) -> bool:
    event = frame.get("event") if frame.get("type") == "thread_event" else None
    return (
        isinstance(event, dict)
        and event.get("threadId") == thread_id
        and event.get("type") == event_type
    )


class Page:
    """One page's side of one host's port: numbered requests, checked answers."""

    def __init__(self, name: str, host: HostProcess) -> None:
        self.name = name
        self.host = host
        self.count = 0
        self.answered: list[str] = []

    def ask(self, kind: str, expect_error: str | None = None, **fields: Any) -> Any:
        """Send one request and check its answer: `ok`, or the Core's error `expect_error`
        (never the host's "internal error"). The result of an `ok` answer."""
        self.count += 1
        request_id = f"{self.name}_{self.count}_{kind}"
        answer = self.host.request(
            {"type": kind, "requestId": request_id, **fields}, ANSWER_TIMEOUT_S
        )
        where = f"{self.name}: {kind} answered {json.dumps(answer)[:600]}"
        if expect_error is None:
            assert answer.get("ok") is True, where
        else:
            assert answer.get("ok") is False, where
            assert answer["error"]["code"] == expect_error, where
        assert answer.get("error", {}).get("message") != errors.MSG_INTERNAL, where
        self.answered.append(kind)
        return answer.get("result")

    def event(self, thread_id: str, event_type: str) -> Frame:
        """Read frames until this event of this thread (other frames are dropped)."""
        frame, _ = self.host.read_until(
            lambda f: _thread_event(f, thread_id, event_type), ANSWER_TIMEOUT_S
        )
        return frame

    def every_request(self, folder: Path, name: Callable[[Path], str] = str) -> list[str]:
        """Every request type the host answers, from `PAGE_ORIGIN`, each answered as the
        dev Core and the host's own rules answer it; the types, in the order asked.
        `name`: how the Core names a folder of this machine (a Core under Wine: its Z:)."""
        self.answered = []
        page = {"callerOrigin": PAGE_ORIGIN, "callerSdkVersion": "0.4.0"}
        first, second = folder / "first", folder / "second"
        for made in (first, second):
            made.mkdir(parents=True, exist_ok=True)
        (first / "a.txt").write_text("a")
        (first / "sub").mkdir(exist_ok=True)
        self.ask("ping")
        self.ask("list_providers", **page)
        self.ask("get_settings", **page)
        workspace = self.ask("open_workspace", path=name(first), **page)["workspace"]
        ws = workspace["workspaceId"]
        self.ask("workspace_list_files", workspaceId=ws, path="/", **page)
        self.ask("workspace_list_folders", workspaceId=ws, path="/", **page)
        self.ask("workspace_run", "DENO_RUNTIME_UNAVAILABLE", workspaceId=ws, script="1", **page)
        self.ask("prepare_workspace_deno_modules", workspaceId=ws, moduleNames=[], **page)
        self.ask(
            "create_workspace_deno_module_upload",
            workspaceId=ws,
            moduleName="m.ts",
            expectedSizeBytes=3,
            **page,
        )
        self.ask("create_workspace_file_download", workspaceId=ws, path="/a.txt", **page)
        other = self.ask("open_workspace", path=name(second), **page)["workspace"]["workspaceId"]
        self.ask(
            "create_workspace_file_upload", workspaceId=other, filename="b.txt", sizeBytes=1, **page
        )
        created = self.ask("create_thread", provider="codex", workspaceId=ws, skills=SKILLS, **page)
        thread = created["threadId"]
        subscribed = self.ask("subscribe_thread", threadId=thread, **page)
        assert subscribed["subscribed"] is True, subscribed
        self.ask("thread_snapshot", threadId=thread, **page)
        self.ask("prepare_thread", threadId=thread, **page)
        self.ask("send_text", threadId=thread, message="hello", **page)
        assert self.event(thread, "assistant_message")["event"]["text"] == "echo: hello"
        self.ask("send_text", threadId=thread, message=TOOL_MESSAGE, **page)
        call = self.event(thread, "tool_call")["event"]
        self.ask(
            "submit_tool_result",
            threadId=thread,
            toolRequestId=call["requestId"],
            result={"counter": 2},
            **page,
        )
        self.event(thread, "tool_result")
        self.ask("create_asset_upload", threadId=thread, filename="x.txt", sizeBytes=1, **page)
        self.ask("create_asset_download", "ASSET_NOT_FOUND", threadId=thread, path="/x", **page)
        self.ask("list_assets", threadId=thread, **page)
        self.ask(
            "create_deno_module_upload",
            threadId=thread,
            moduleName="m.ts",
            expectedSizeBytes=3,
            **page,
        )
        self.ask("abort_session_setup", threadId=thread, **page)
        self.ask("end_thread", threadId=thread, **page)
        self.event(thread, "ended")
        self.ask("resume_thread", threadId=thread, **page)
        approved = self.ask("approve_origin", origin=APPROVED_ORIGIN)
        assert approved["origin"] == "https://xn--strae-oqa.example", approved
        listed = self.ask("list_origin_approvals")
        assert "https://xn--strae-oqa.example" in [a["origin"] for a in listed["approved"]]
        self.ask("revoke_origin", origin=APPROVED_ORIGIN)
        return list(dict.fromkeys(self.answered))


class FakeDesktop:
    """Pedelec Desktop as `app-launch.json` names it: a script that runs the dev Core of
    the tests' interpreter (current generation) on the Pedelec home."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.home = home
        self.launches_file = root / "launches.jsonl"
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = {
            "mode": "core",
            "delay_s": 0.1,
            "home": str(home),
            "launches": str(self.launches_file),
            "lifetime_s": 300,
            "python": sys.executable,
            "dev_core": True,
            "generation": "current",
        }
        self.app = root / "pedelec-app"
        self.app.write_text(f"#!{sys.executable}\n{FAKE_DESKTOP}\nmain({config!r})\n")
        self.app.chmod(0o755)

    def register(self) -> None:
        """Write `app-launch.json` (spec 4.1), as the Desktop's first foreground start does."""
        document = {
            "version": 1,
            "executablePath": str(self.app),
            "backgroundArgs": ["--background"],
        }
        (self.home / "app-launch.json").write_text(json.dumps(document))

    def launches(self) -> list[dict[str, Any]]:
        try:
            lines = self.launches_file.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def kill(self) -> None:
        """Every process launched from this test's files (checked by its command line,
        against a reused pid)."""
        for launch in self.launches():
            pid = launch["pid"]
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(self.home).encode() in cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


class Desktop(Protocol):
    """Pedelec Desktop as the hosts start it: `FakeDesktop`, or the Windows lane's."""

    def register(self) -> None: ...
    def launches(self) -> list[Any]: ...
    def kill(self) -> None: ...


class ThreeLiveHosts:
    """The three hosts, the dev Core they talk to and the Desktop that restarts it.

    `command()` is how Chrome would start the host now (the manifest's path, usually):
    asked again for the host started after the upgrade. On the Windows lane, `spawn`
    starts a host instead (as Chrome on Windows does), `home` and `log_dir` are this
    machine's names of the host's folders, and `relaunched_names` how the Desktop's Core
    (a Windows program there) names a folder."""

    def __init__(
        self,
        root: Path,
        command: Callable[[], Sequence[str]],
        env: dict[str, str],
        spawn: Callable[[], HostProcess] | None = None,
        home: Path | None = None,
        log_dir: Path | None = None,
        desktop: Desktop | None = None,
        relaunched_names: Callable[[Path], str] = str,
    ):
        self.root = root
        self.command = command
        self.env = env
        self.spawn = spawn or (
            lambda: HostProcess(list(command()), (OFFICIAL_ORIGIN,), env, cwd=str(root))
        )
        self.home = home or Path(env["PEDELEC_HOME"])
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir or Path(env["PEDELEC_NATIVE_HOST_LOG_DIR"])
        faults = Faults(gate_types={"get_settings"}, gate_stream_events=True)
        settings = DevCoreSettings(home=self.home, generation="current", faults=faults)
        self.core = DevCore(settings).start()
        self.desktop = desktop or FakeDesktop(root / "desktop", self.home)
        self.relaunched_names = relaunched_names
        self.hosts: list[HostProcess] = []
        self.pages: dict[str, Page] = {}
        self.thread = ""

    @staticmethod
    def environment(root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
        """Everything the hosts write or read under `root` (`base`: the user's own)."""
        return isolated_env(base if base is not None else os.environ, root)

    def start_host(self, name: str) -> Page:
        host = self.spawn()
        self.hosts.append(host)
        page = self.pages[name] = Page(name, host)
        page.ask("ping")
        return page

    # -- before ------------------------------------------------------------------------
    def start(self) -> None:
        """Mid-stream, in flight, idle; no origin, no policy, one subscription."""
        streaming = self.start_host("streaming")
        self.thread = streaming.ask("create_thread", provider="codex")["threadId"]
        streaming.ask("subscribe_thread", threadId=self.thread)
        streaming.ask("send_text", threadId=self.thread, message="/stream 3 through the upgrade")
        waiting = self.start_host("waiting")
        waiting.host.send({"type": "get_settings", "requestId": "in_flight"})
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while self.core.gated < 1:
            assert time.monotonic() < deadline, "the request in flight never reached the Core"
            time.sleep(0.01)
        self.start_host("idle")

    # -- after -------------------------------------------------------------------------
    def after_upgrade(self) -> None:
        """The held events and the held answer, then every request type on every host."""
        self.core.open_gate()
        streaming = self.pages["streaming"]
        message = streaming.event(self.thread, "assistant_message")["event"]
        assert message["text"] == "echo: through the upgrade", message
        streaming.event(self.thread, "operation_completed")
        answer = self.pages["waiting"].host.response("in_flight", ANSWER_TIMEOUT_S)
        assert answer["ok"] is True and "defaultModels" in answer["result"], answer
        self.every_request("after the upgrade")

    def core_restart(self) -> None:
        """The Core dies; each host's next request starts the Desktop (once for all of
        them), whose Core then answers every request type on every host."""
        self.desktop.register()
        self.core.stop()
        closed, _ = self.pages["streaming"].host.read_until(
            lambda f: (
                f.get("type") == "thread_subscription_closed" and f["threadId"] == self.thread
            ),
            ANSWER_TIMEOUT_S,
        )
        assert closed["error"]["code"] == errors.NATIVE_CONNECTION_CLOSED, closed
        for page in self.pages.values():
            page.host.send({"type": "ping", "requestId": f"{page.name}_relaunch"})
        for page in self.pages.values():
            answer = page.host.response(f"{page.name}_relaunch", LAUNCH_TIMEOUT_S)
            assert answer["ok"] is True, f"{page.name}: {answer}"
        assert len(self.desktop.launches()) == 1, self.desktop.launches()
        self.every_request("after the Core's restart", self.relaunched_names)

    def every_request(self, when: str, names: Callable[[Path], str] = str) -> None:
        for name, page in self.pages.items():
            answered = page.every_request(self.root / "folders" / when / name, names)
            assert len(answered) == 27, f"{name} {when}: {answered}"

    # -- what ran ----------------------------------------------------------------------
    def starts(self) -> dict[int, tuple[str, str]]:
        """Each host's pid -> (version, image state), from the relay's first log line."""
        return {pid: found for pid, found in self._started()}

    def _started(self) -> list[tuple[int, tuple[str, str]]]:
        text = "".join(p.read_text() for p in sorted(self.log_dir.glob("*.log*")))
        return [(int(m[1]), (m[2], m[3])) for m in START_LINE.finditer(text)]

    def start_of(self, index: int) -> tuple[str, str]:
        """(version, image state) of the `index`-th host this started: by its pid, or, for
        a host whose pid is another system's (Wine), by the order of the log's lines (each
        host is started, and answers, before the next)."""
        started = self._started()
        by_pid = dict(started)
        pid = self.hosts[index].proc.pid
        return by_pid[pid] if pid in by_pid else started[index][1]

    def versions(self) -> set[str]:
        """The versions the three live hosts run."""
        return {self.start_of(index)[0] for index in range(3)}

    def next_start(self) -> tuple[str, str]:
        """A host started now as Chrome would: the version it runs and how it fared with
        its image."""
        page = self.start_host(f"next{len(self.hosts)}")
        page.host.close_stdin()
        page.host.wait(60)
        return self.start_of(len(self.hosts) - 1)

    def close(self) -> None:
        """Stop every host and Core; then fail if a host wrote a bad frame or logged a
        traceback (its safety nets log one; no upgrade may reach them)."""
        for host in self.hosts:
            host.stop()
        self.core.stop()
        self.desktop.kill()
        for host in self.hosts:
            host.check_protocol()
        log = "".join(p.read_text() for p in sorted(self.log_dir.glob("*.log*")))
        assert "Traceback" not in log, log[log.find("Traceback") - 1500 :][:4000]
