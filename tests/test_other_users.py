"""Another local user attacks, for real (docs/security.md).

Two throwaway users: `alice` runs the host, exactly as her browser would, and `mallory`
squats the Core's stale port or plants files and programs. The host runs as alice from
a copy of this package with Debian's own interpreter (the project's lives under /root,
which alice cannot read); mallory's programs leave marker files, so "nothing planted
executes" and "the squatter receives zero bytes" are read off the disk.

These tests need root (CI runs as root) and never skip: a user that cannot be created
fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native_host.hostproc import HostProcess
from tests.support.markers import needs_os
from tests.support.runtime import free_port, runtime_document
from tests.support.users import SYSTEM_PYTHON, LocalUser, skip_unless_root, throwaway_users

pytestmark = [
    pytest.mark.process,
    needs_os("linux", reason="throwaway users through useradd, processes found through /proc"),
]

REPO = Path(__file__).resolve().parent.parent
FAKE_DESKTOP = (REPO / "tests" / "launch_support" / "fake_desktop.py").read_text()
PROMPT = "my secret plans for the weekend"

SQUATTER = textwrap.dedent(
    """
    import socket, sys, threading
    port, record = int(sys.argv[1]), sys.argv[2]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(16)
    print("listening", flush=True)
    def take(conn):
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                with open(record, "ab") as f:
                    f.write(data)
                conn.sendall(b'{"requestId":"x","ok":true,"result":{"connected":true}}\\n')
    while True:
        conn, _ = server.accept()
        with open(record, "ab") as f:
            f.write(b"")
        threading.Thread(target=take, args=(conn,), daemon=True).start()
    """
)


def give(path: Path, user: LocalUser, mode: int) -> Path:
    os.chown(path, user.uid, user.gid)
    path.chmod(mode)
    return path


class Scene:
    """alice's machine: her Pedelec home and host dirs, her host, mallory next door."""

    def __init__(self, alice: LocalUser, mallory: LocalUser, package: Path) -> None:
        self.alice = alice
        self.mallory = mallory
        self.package = package
        root = alice.workdir
        self.home = root / "pedelec-home"
        self.dirs = {
            "PEDELEC_HOME": self.home,
            "PEDELEC_NATIVE_HOST_CONFIG_DIR": root / "config",
            "PEDELEC_NATIVE_HOST_STATE_DIR": root / "state",
            "PEDELEC_NATIVE_HOST_LOG_DIR": root / "logs",
        }
        for directory in self.dirs.values():
            directory.mkdir()
            give(directory, alice, 0o700)
        self.launches = self.write(root / "launches.jsonl", "", alice)
        self.hosts: list[HostProcess] = []
        self.procs: list[Any] = []
        # mallory's public corner: a directory others may read but only she may write
        self.corner = Path(f"/tmp/{mallory.name}-public")
        self.corner.mkdir()
        give(self.corner, mallory, 0o755)

    def write(self, path: Path, text: str, owner: LocalUser, mode: int = 0o600) -> Path:
        path.write_text(text)
        return give(path, owner, mode)

    def runtime(self, port: int, pid: int, owner: LocalUser | None = None) -> None:
        document = json.dumps(runtime_document(port, pid))
        self.write(self.home / "runtime.json", document, owner or self.alice, 0o644)

    def desktop(self, directory: Path | None = None, owner: LocalUser | None = None) -> Path:
        """A fake Pedelec Desktop (stdlib only) that starts a pinging Core as its owner."""
        config = {
            "mode": "core",
            "delay_s": 0.1,
            "home": str(self.home),
            "launches": str(self.launches),
            "lifetime_s": 60,
            "python": SYSTEM_PYTHON,
        }
        app = (directory or self.alice.workdir) / "pedelec-app"
        text = f"#!{SYSTEM_PYTHON}\n{FAKE_DESKTOP}\nmain({config!r})\n"
        return self.write(app, text, owner or self.alice, 0o755)

    def launch_config(self, executable: Path, owner: LocalUser | None = None) -> None:
        document = {
            "version": 1,
            "executablePath": str(executable),
            "backgroundArgs": ["--background"],
        }
        # the Desktop writes it with default permissions: readable by all, as a planter would
        self.write(self.home / "app-launch.json", json.dumps(document), owner or self.alice, 0o644)

    def launched(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.launches.read_text().splitlines() if line]

    def squat(self, port: int) -> Path:
        """mallory listens on `port`, recording every byte she receives."""
        record = self.corner / "received"
        proc = self.mallory.spawn_python(SQUATTER, str(port), str(record))
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "listening"
        return record

    def start_host(self) -> HostProcess:
        """alice's browser starting the host: her uid, her environment, her dirs."""
        bootstrap = (
            f"import sys; sys.path.insert(0, {str(self.package)!r}); "
            "from native_host.cli import main; sys.exit(main())"
        )
        command = [
            "setpriv",
            f"--reuid={self.alice.uid}",
            f"--regid={self.alice.gid}",
            "--clear-groups",
            "--",
            SYSTEM_PYTHON,
            "-I",
            "-S",
            "-c",
            bootstrap,
        ]
        env = self.alice.env(**{k: str(v) for k, v in self.dirs.items()})
        host = HostProcess(command, env=env, cwd=str(self.alice.workdir))
        self.hosts.append(host)
        return host

    def log(self) -> str:
        logs = self.dirs["PEDELEC_NATIVE_HOST_LOG_DIR"]
        return "".join(p.read_text() for p in sorted(logs.glob("*.log*")))

    def close(self) -> None:
        for host in self.hosts:
            host.stop()
        for proc in self.procs:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(self.corner, ignore_errors=True)


@pytest.fixture(scope="module")
def package() -> Iterator[Path]:
    """This checkout's package, copied where every user can read it (pytest's own temp
    dirs are private to root)."""
    root = Path(tempfile.mkdtemp(prefix="pedelec-package-"))
    try:
        shutil.copytree(REPO / "native_host", root / "native_host")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scene(package: Path) -> Iterator[Scene]:
    skip_unless_root()
    with throwaway_users() as make_user:
        built = Scene(make_user(), make_user(), package)
        try:
            yield built
        finally:
            built.close()


def send_text(host: HostProcess, request_id: str) -> dict[str, Any]:
    return host.request(
        {"type": "send_text", "requestId": request_id, "threadId": "t000001", "message": PROMPT},
        timeout=30,
    )


def test_a_squatter_on_the_stale_port_receives_nothing_and_the_desktop_is_started(
    scene: Scene,
) -> None:
    """The Desktop is down, runtime.json names its old port and a pid that is alive
    again (pid 1 here); mallory binds that port. The host refuses her before writing a
    byte, starts the genuine Desktop, and the prompt reaches alice's own Core."""
    port = free_port()
    received = scene.squat(port)
    scene.runtime(port, pid=1)
    scene.launch_config(scene.desktop())
    host = scene.start_host()
    reply = send_text(host, "r1")
    assert reply["error"]["message"] == "unknown type", reply  # alice's fake Core answered
    assert len(scene.launched()) == 1
    assert not received.exists() or received.read_bytes() == b"", received.read_bytes()
    assert "refused the listener" in scene.log()
    assert PROMPT not in scene.log()


def test_without_a_desktop_to_start_the_squatter_still_gets_nothing(scene: Scene) -> None:
    port = free_port()
    received = scene.squat(port)
    scene.runtime(port, pid=1)
    host = scene.start_host()
    reply = send_text(host, "r1")
    assert reply["error"]["code"] == "CORE_RUNTIME_UNAVAILABLE"
    assert reply["error"]["details"]["stage"] == "read_launch_config"
    assert not received.exists() or received.read_bytes() == b""


def test_runtime_json_planted_by_another_user_is_not_used(scene: Scene) -> None:
    port = free_port()
    received = scene.squat(port)
    scene.runtime(port, pid=os.getpid(), owner=scene.mallory)
    scene.launch_config(scene.desktop())
    host = scene.start_host()
    assert send_text(host, "r1")["error"]["message"] == "unknown type"
    assert not received.exists() or received.read_bytes() == b""


def test_app_launch_json_planted_by_another_user_is_not_obeyed(scene: Scene) -> None:
    payload = scene.desktop(scene.corner, owner=scene.mallory)
    scene.launch_config(payload, owner=scene.mallory)
    host = scene.start_host()
    reply = send_text(host, "r1")
    details = reply["error"]["details"]
    assert (details["stage"], details["violation"]) == ("read_launch_config", "foreign_owner")
    assert scene.launched() == []


def test_a_symlink_to_another_users_program_is_not_run(scene: Scene) -> None:
    payload = scene.desktop(scene.corner, owner=scene.mallory)
    link = scene.alice.workdir / "pedelec-app-link"
    link.symlink_to(payload)
    os.lchown(link, scene.alice.uid, scene.alice.gid)
    scene.launch_config(link)
    reply = send_text(scene.start_host(), "r1")
    details = reply["error"]["details"]
    assert details["violation"] == "executableDirectory"  # mallory's directory, first
    assert details["error"] == f"{scene.corner} (a directory on the way) belongs to another user"
    assert scene.launched() == []


def test_a_program_in_a_directory_anybody_can_write_is_not_run(scene: Scene) -> None:
    shared = Path(f"/tmp/{scene.alice.name}-shared")
    shared.mkdir()
    try:
        shared.chmod(0o777)  # not sticky: mallory could swap the app inside it
        scene.launch_config(scene.desktop(shared))
        reply = send_text(scene.start_host(), "r1")
        assert reply["error"]["details"]["violation"] == "executableDirectory"
        assert scene.launched() == []
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_script_whose_interpreter_another_user_controls_is_not_run(scene: Scene) -> None:
    interpreter = scene.corner / "python3"
    shutil.copy(SYSTEM_PYTHON, interpreter)
    give(interpreter, scene.mallory, 0o755)
    app = scene.desktop()
    app.write_text(app.read_text().replace(f"#!{SYSTEM_PYTHON}", f"#!{interpreter}", 1))
    scene.launch_config(app)
    reply = send_text(scene.start_host(), "r1")
    details = reply["error"]["details"]
    assert details["violation"] == "interpreter"
    assert "belongs to another user" in details["error"]
    assert scene.launched() == []


def test_the_genuine_core_of_the_user_still_works(scene: Scene) -> None:
    """The checks refuse strangers, not alice's own Desktop started by hand."""
    scene.launch_config(scene.desktop())
    host = scene.start_host()
    assert host.request({"type": "ping", "requestId": "p"}, timeout=30)["ok"]
    deadline = time.monotonic() + 10
    while len(scene.launched()) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host.request({"type": "ping", "requestId": "again"}, timeout=30)["ok"]
    assert len(scene.launched()) == 1


def test_doctor_names_the_squatter_in_words_a_user_can_act_on(scene: Scene, tmp_path: Path) -> None:
    """doctor pings through the host's own gateway, so it refuses the squatter as the host
    does, and says why and what to do. doctor runs as this test's user (it needs the
    project's interpreter), with a Pedelec home of its own."""
    import subprocess
    import sys

    port = free_port()
    received = scene.squat(port)
    home = tmp_path / "pedelec-home"
    home.mkdir()
    runtime = {"protocol": "pedelec-core-ipc-v1", "host": "127.0.0.1", "port": port}
    (home / "runtime.json").write_text(
        json.dumps({**runtime, "endpoint": f"127.0.0.1:{port}", "pid": 1})
    )
    env = {
        **os.environ,
        "PEDELEC_HOME": str(home),
        "PEDELEC_NATIVE_HOST_CONFIG_DIR": str(tmp_path / "config"),
        "PEDELEC_NATIVE_HOST_STATE_DIR": str(tmp_path / "state"),
        "PEDELEC_NATIVE_HOST_LOG_DIR": str(tmp_path / "logs"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "native_host", "doctor", "--json", "--browser", "chrome"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
    rows = json.loads(done.stdout)["findings"]
    (ping,) = [r for r in rows if r["check"] == "Core answers ping"]
    assert ping["status"] == "fail"
    assert (
        "refused: the program listening on the Core's port belongs to another user"
        in (ping["detail"])
    )
    assert "squatting" in ping["hint"]
    assert not received.exists() or received.read_bytes() == b""
