"""`runtime.json` as the Desktop writes it (spec 3.1), for tests whose Core is their own
(a scripted server, a squatter, a closed port) rather than the dev Core."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

PROTOCOL = "pedelec-core-ipc-v1"


def runtime_document(port: int, pid: int) -> dict[str, Any]:
    """A valid `runtime.json` for a Core on 127.0.0.1:`port` run by process `pid`."""
    return {
        "protocol": PROTOCOL,
        "host": "127.0.0.1",
        "port": port,
        "endpoint": f"127.0.0.1:{port}",
        "pid": pid,
    }


def write_runtime(home: Path, port: int, pid: int) -> Path:
    """Write that document to `home/runtime.json` (creating `home`); its path."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "runtime.json"
    path.write_text(json.dumps(runtime_document(port, pid)))
    return path


def free_port() -> int:
    """A loopback port nothing listens on right now (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
