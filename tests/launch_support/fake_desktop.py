"""Body of the fake Pedelec Desktop executable that tests/test_launch.py writes to tmp.

The test prepends a `#!/usr/bin/env python3` line and appends `main({...config...})`,
so the file runs as a standalone program with only the standard library:

1. append one JSON line describing how it was started to `config["launches"]`;
2. sleep `config["delay_s"]`;
3. by `config["mode"]`: `core` serves pings (exec'ing the project's dev Core when
   `config["dev_core"]` is set, of `config["generation"]`, legacy by default), `silent`
   writes runtime.json and accepts TCP but never answers, `failing` answers every
   request `ok:false`, `never` writes nothing.
   It exits by itself after `config["lifetime_s"]`, so a crashed test run leaves no
   orphan behind for long.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any


def _fd_is_devnull(fd: int) -> bool:
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    null = os.stat(os.devnull)
    return (st.st_dev, st.st_ino, st.st_rdev) == (null.st_dev, null.st_ino, null.st_rdev)


def _extra_fds() -> list[int]:
    """Descriptors other than 0-2 that the launcher leaked into us."""
    try:
        listing = os.listdir("/proc/self/fd")
    except OSError:
        listing = os.listdir("/dev/fd")
    fds = []
    for name in listing:
        fd = int(name)
        if fd > 2:
            try:
                os.fstat(fd)
            except OSError:
                continue  # the directory handle used for the listing itself
            fds.append(fd)
    return sorted(fds)


def _record(config: dict[str, Any]) -> None:
    entry = {
        "pid": os.getpid(),
        "sid": os.getsid(0),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "stdio_devnull": [_fd_is_devnull(fd) for fd in (0, 1, 2)],
        "extra_fds": _extra_fds(),
        "pyi_env": sorted(k for k in os.environ if k.startswith("_PYI_") or k == "_MEIPASS2"),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
        "marker": os.environ.get("FAKE_DESKTOP_MARKER"),
    }
    fd = os.open(config["launches"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)


def _write_runtime(home: str, port: int) -> None:
    runtime = {
        "protocol": "pedelec-core-ipc-v1",
        "host": "127.0.0.1",
        "port": port,
        "endpoint": f"127.0.0.1:{port}",
        "pid": os.getpid(),
    }
    tmp = os.path.join(home, f"runtime.json.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(runtime, f, indent=2)
    os.replace(tmp, os.path.join(home, "runtime.json"))


def _serve_connection(conn: socket.socket, mode: str) -> None:
    with conn:
        buffer = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if mode == "silent":
                    continue
                request = json.loads(line)
                if mode == "core" and request.get("type") == "ping":
                    reply: dict[str, Any] = {"ok": True, "result": {"connected": True}}
                else:
                    reply = {
                        "ok": False,
                        "error": {"code": "IPC_UNAVAILABLE", "message": "unknown type"},
                    }
                reply["requestId"] = request.get("requestId", "")
                conn.sendall(json.dumps(reply).encode() + b"\n")


def _serve(home: str, mode: str) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    _write_runtime(home, server.getsockname()[1])
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve_connection, args=(conn, mode), daemon=True).start()


def main(config: dict[str, Any]) -> None:
    _record(config)
    time.sleep(config["delay_s"])
    threading.Timer(config["lifetime_s"], os._exit, args=(0,)).start()
    mode = config["mode"]
    if mode == "core" and config.get("dev_core"):
        argv = [config["python"], "-m", "native_host", "dev-core", "--home", config["home"]]
        generation = config.get("generation", "legacy")
        os.execv(config["python"], [*argv, "--generation", generation])
    if mode != "never":
        threading.Thread(target=_serve, args=(config["home"], mode), daemon=True).start()
    time.sleep(config["lifetime_s"])
    os._exit(0)
