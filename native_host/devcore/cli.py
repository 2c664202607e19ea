"""`pedelec-native-host dev-core`: run a dev Core until SIGTERM (exit 0) or Ctrl-C (130).

It never touches Pedelec Desktop's files: without `--home` it serves from a fresh
temporary home (printed, removed at exit), and it refuses a `--home` whose `runtime.json`
names a running Core that is not a dev Core — replacing that file would cut the user's
Desktop off from every host until the Desktop restarts. It creates no folder but `--home`
itself: a `--home` or `--record` whose parent folder is missing is a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType

from pydantic import ValidationError

from native_host.core.discovery import CoreUnreachableError, parse_runtime, pid_alive
from native_host.devcore.faults import Faults
from native_host.devcore.server import DEV_CORE_MARKER, RUNTIME_FILE, DevCore
from native_host.devcore.settings import DevCoreSettings
from native_host.files import FileRefusedError, read_trusted
from native_host.usage import EXIT_USAGE, Parser, existing_parent, port

PROBE_TIMEOUT_S = 1.0
PROBE_MAX_BYTES = 65_536


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pedelec-native-host dev-core",
        description="Run a development Pedelec Core (pedelec-core-ipc-v1) on 127.0.0.1 until "
        "Ctrl-C or SIGTERM.",
    )
    parser.add_argument(
        "--home",
        type=existing_parent,
        metavar="DIR",
        help="where runtime.json goes, created if missing (its parent must exist); default: "
        "a fresh temporary directory, removed at exit; point the host at it with PEDELEC_HOME",
    )
    parser.add_argument(
        "--port", type=port, default=0, help="TCP port, 0-65535 (default 0: any free port)"
    )
    parser.add_argument(
        "--generation",
        choices=("legacy", "current"),
        default="current",
        help="the protocol to serve: legacy (Pedelec 0.1.23) or current (0.3-0.4, with "
        "snapshots, operations and Workspaces; the default)",
    )
    parser.add_argument("--version", default="0.4.0", help="version a current ping reports")
    parser.add_argument("--faults", help="faults as a JSON object, or @file.json")
    parser.add_argument(
        "--record",
        type=existing_parent,
        metavar="FILE",
        help="append each request line received to FILE (its folder must exist)",
    )
    return parser


def _load_faults(text: str | None) -> Faults:
    if text is None:
        return Faults()
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    return Faults.model_validate(json.loads(text))


def _why_not(exc: Exception) -> str:
    """One line: pydantic's report names each bad field on lines of its own."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'faults'}: {e['msg']}" for e in exc.errors()
        )
    return str(exc)


def _answers_ping(port: int) -> bool:
    """Whether a Core answers a `ping` there: something else on a reused port does not."""
    request = {"requestId": "dev-core-probe", "type": "ping", "payload": {}}
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT_S) as sock:
            sock.sendall(json.dumps(request).encode() + b"\n")
            reply = b""
            while b"\n" not in reply and len(reply) < PROBE_MAX_BYTES:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        answer = json.loads(reply.split(b"\n", 1)[0])
    except (OSError, ValueError):
        return False
    return isinstance(answer, dict) and answer.get("requestId") == request["requestId"]


def foreign_core(home: Path) -> str | None:
    """Why `home/runtime.json` belongs to a running Core that is not a dev Core, or None.

    Only a valid file whose pid is alive and whose port answers a Core `ping` counts: a
    stale or broken one is what the host itself treats as "no Core" (and launches the
    Desktop to replace).
    """
    path = home / RUNTIME_FILE
    try:
        raw = read_trusted(path).decode("utf-8")
        endpoint = parse_runtime(raw)
        data = json.loads(raw)
    except (FileRefusedError, UnicodeDecodeError, CoreUnreachableError, ValueError):
        return None
    if data.get(DEV_CORE_MARKER) is True or endpoint.pid == os.getpid():
        return None
    if not pid_alive(endpoint.pid) or not _answers_ping(endpoint.port):
        return None
    return (
        f"{path} belongs to a running Core (pid {endpoint.pid}, {endpoint.endpoint}), "
        "probably Pedelec Desktop's; refusing to replace it. Leave out --home to use a "
        "temporary home, or pass another directory."
    )


def main(argv: list[str]) -> int:
    """Entry point; `argv[0]` is the word `dev-core`."""
    parser = _parser()
    args = parser.parse_args(argv[1:])
    try:
        faults = _load_faults(args.faults)
    except (OSError, ValueError, ValidationError) as exc:
        parser.error(f"--faults: {_why_not(exc)}")
    if args.home is not None:
        refusal = foreign_core(args.home)
        if refusal is not None:
            sys.stderr.write(f"error: {refusal}\n")
            return EXIT_USAGE
        return _serve(args, faults, args.home)
    with tempfile.TemporaryDirectory(prefix="pedelec-dev-core-") as home:
        return _serve(args, faults, Path(home))


def _serve(args: argparse.Namespace, faults: Faults, home: Path) -> int:
    settings = DevCoreSettings(
        home=home,
        generation=args.generation,
        port=args.port,
        version=args.version,
        faults=faults,
        record_file=args.record,
        hard_exit=True,
    )
    stop = threading.Event()

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGTERM is how scripts stop it (exit 0); Ctrl-C is the command line's (exit 130).
    signal.signal(signal.SIGTERM, on_terminate)
    core = DevCore(settings)
    try:
        core.start()
        sys.stdout.write(
            f"dev-core listening on {core.endpoint} "
            f"(generation {settings.generation}, home {settings.home})\n"
        )
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        core.stop()
    return 0
