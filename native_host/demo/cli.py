"""`pedelec-native-host demo [--json] [--generation current|legacy]`: the command line."""

from __future__ import annotations

import os
import sys

from native_host.demo.session import HOST_CMD_ENV, Emit, Record, run_demo
from native_host.demo.transcript import Transcript, json_line
from native_host.usage import Parser


def printer(as_json: bool) -> Emit:
    """Write each record as it happens, so a slow step shows where it is stuck."""
    transcript = Transcript()

    def emit(record: Record) -> None:
        lines = [json_line(record)] if as_json else transcript.lines(record)
        try:
            sys.stdout.write("".join(f"{line}\n" for line in lines))
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader went away (`| head`): finish quietly, still cleaning up.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    return emit


def main(argv: list[str]) -> int:
    """`pedelec-native-host demo [--json] [--generation current|legacy]`."""
    parser = Parser(
        prog="pedelec-native-host demo",
        description="Walk a full Pedelec session through the host, run as Chrome runs it, "
        "against a dev Core in a temporary home. Exit status 0 when every step passed. "
        f"${HOST_CMD_ENV} runs another host build (a path or shell-quoted command).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--generation",
        choices=("current", "legacy"),
        default="current",
        help="protocol generation of the dev Core (default: current)",
    )
    args = parser.parse_args(argv[1:])
    return run_demo(args.generation, printer(args.json))
