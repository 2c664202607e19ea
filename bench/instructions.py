"""Instructions from spawn to the first `ping` answer, counted by callgrind: figure (1) in a
unit a loaded machine cannot disturb.

Every variant of `bench/run.py`'s figure (1) (the minimal relay, the echo, the venv's
registered launcher, every `--bundle`) is started under `valgrind --tool=callgrind
--trace-children=yes`, sent one `ping`, and ended with SIGTERM once the answer is read, so
every count stops at the answer (no exit or interpreter teardown). Counts are of user-space
instructions of the image that answers: what ran before its last `execve` (a `/bin/sh`
launcher, the first pass of a bundle's bootloader, which re-executes itself on Linux) and
system calls (files read, the peer check's netlink queries) are not in them, so they
complement the timed figures and do not replace them.

Usage: python3 bench/instructions.py [--bundle [LABEL=]PATH]... [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.*, tests.*

from bench import builds, processes
from bench.run import make_variants, parse_bundles
from native_host.devcore import DevCore, DevCoreSettings
from native_host.hostproc import OFFICIAL_ORIGIN
from tests.support.checkout import permanent_directory

COLLECTED = re.compile(rb"Collected : (\d+)")
WAIT_S = 300.0


def count(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Instructions of `command` (and every process it executes) up to its ping answer."""
    valgrind = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--trace-children=yes",
    ]
    proc = subprocess.Popen(
        [*valgrind, *command, OFFICIAL_ORIGIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(processes.PING)
    proc.stdin.flush()
    prefix = proc.stdout.read(4)
    if len(prefix) < 4:
        _, stderr = proc.communicate(timeout=WAIT_S)
        raise RuntimeError(f"{command[0]} did not answer: {stderr[-2000:]!r}")
    reply = json.loads(proc.stdout.read(int.from_bytes(prefix, "little")))
    if reply.get("ok") is not True:
        raise RuntimeError(f"{command[0]} answered ping with {reply}")
    proc.send_signal(signal.SIGTERM)  # valgrind reports a client ended by a signal
    _, stderr = proc.communicate(timeout=WAIT_S)
    counts = [int(n) for n in COLLECTED.findall(stderr)]
    if not counts:
        raise RuntimeError(f"no callgrind total for {command[0]}: {stderr[-2000:]!r}")
    return sum(counts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundle", action="append", default=[], metavar="[LABEL=]PATH")
    parser.add_argument("--runs", type=int, default=1, help="counts per variant (default 1)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not on PATH (apt-get install -y valgrind)")
    bundles = parse_bundles(args.bundle)
    with (
        tempfile.TemporaryDirectory(prefix="pedelec-bench-") as temp,
        permanent_directory() as lasting,
    ):
        root = Path(temp)
        venv, _ = builds.build_wheel_venv(root / "build", lasting / "venv")
        env = processes.user_env(os.environ, root / "world")
        variants = make_variants(root, venv, env, bundles)
        print("instructions from spawn to the ping's answer (callgrind), millions")
        with DevCore(DevCoreSettings(home=processes.pedelec_home(env), generation="current")):
            floor = 0.0
            for variant in variants:
                samples = sorted(count(variant.command, env) for _ in range(args.runs))
                value = samples[len(samples) // 2] / 1e6
                floor = floor or value
                print(f"  {variant.label:<10} {value:8.2f} M   {value / floor:.3f}x relay")
    return 0


if __name__ == "__main__":
    sys.exit(main())
