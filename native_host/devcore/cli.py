"""`pedelec-native-host dev-core`: run a dev Core until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from pydantic import ValidationError

from native_host.devcore.faults import Faults
from native_host.devcore.server import DevCore
from native_host.devcore.settings import DevCoreSettings
from native_host.paths import pedelec_home


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pedelec-native-host dev-core",
        description="Run a development Pedelec Core (pedelec-core-ipc-v1) on 127.0.0.1.",
    )
    parser.add_argument(
        "--home", type=Path, help="Pedelec home (default $PEDELEC_HOME or ~/.pedelec)"
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: ephemeral)")
    parser.add_argument("--generation", choices=("legacy", "current"), default="current")
    parser.add_argument("--version", default="0.4.0", help="version a current ping reports")
    parser.add_argument("--faults", help="faults as a JSON object, or @file.json")
    parser.add_argument("--record", type=Path, help="append each request line received to FILE")
    return parser


def _load_faults(text: str | None) -> Faults:
    if text is None:
        return Faults()
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    return Faults.model_validate(json.loads(text))


def main(argv: list[str]) -> int:
    """Entry point; `argv[0]` is the word `dev-core`."""
    parser = _parser()
    args = parser.parse_args(argv[1:])
    try:
        faults = _load_faults(args.faults)
    except (OSError, ValueError, ValidationError) as exc:
        parser.error(f"--faults: {exc}")
    settings = DevCoreSettings(
        home=args.home or pedelec_home(),
        generation=args.generation,
        port=args.port,
        version=args.version,
        faults=faults,
        record_file=args.record,
        hard_exit=True,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    core = DevCore(settings).start()
    sys.stdout.write(
        f"dev-core listening on {core.endpoint} "
        f"(generation {settings.generation}, home {settings.home})\n"
    )
    sys.stdout.flush()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        core.stop()
    return 0
