"""What a relay start imports before it answers one `ping`, and what each import costs.

Runs the host with `-X importtime` against the dev Core (in a user-like environment under
a temporary HOME, so the host finds its dirs with platformdirs as for users; no config file),
answers one ping, closes stdin, and ranks the modules by their own import time (median of
`--runs` starts), each with the chain that imported it, then sums what every native_host
module pulls in. By default the host is this checkout (`python -X importtime -m
native_host chrome-extension://<official id>/`); `--command` runs another build, e.g. a
bundle built with PEDELEC_BUNDLE_IMPORTTIME=1 (a frozen interpreter ignores
PYTHONPROFILEIMPORTTIME, so the option has to be built in).

Usage: python3 bench/imports.py [--runs N] [--top N] [--venv | --command ARGV...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import builds
from bench.processes import PING, WAIT_S, pedelec_home, user_env
from native_host.devcore import DevCore, DevCoreSettings
from native_host.hostproc import OFFICIAL_ORIGIN

FIRST_PARTY = "native_host"


class Node(NamedTuple):
    """One `import time:` line: its own and cumulative microseconds, and its parents."""

    name: str
    self_us: int
    cumulative_us: int
    chain: tuple[str, ...]
    """Who imported it, outermost first."""


def parse_importtime(text: str) -> list[Node]:
    """The import tree of `-X importtime` output, flattened in import order.

    A line is printed when its import finishes, after its children, and indented two
    spaces per nesting level: a line at level L adopts the pending lines at level L+1.
    """
    pending: dict[int, list[tuple[str, int, int, list[Any]]]] = {}
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, label = line[len("import time:") :].split("|", 2)
        level = (len(label) - len(label.lstrip(" ")) - 1) // 2
        children = pending.pop(level + 1, [])
        pending.setdefault(level, []).append((label.strip(), int(own), int(cumulative), children))
    nodes: list[Node] = []

    def walk(items: Iterable[tuple[str, int, int, list[Any]]], chain: tuple[str, ...]) -> None:
        for name, own, cumulative, children in items:
            nodes.append(Node(name, own, cumulative, chain))
            walk(children, (*chain, name))

    walk(pending.get(0, []), ())
    return nodes


def one_start(command: Sequence[str], env: dict[str, str]) -> str:
    """The stderr of one host start that answers one ping and exits on EOF."""
    proc = subprocess.Popen(
        [*command, OFFICIAL_ORIGIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(PING)
    proc.stdin.flush()
    size = int.from_bytes(proc.stdout.read(4), "little")
    reply = json.loads(proc.stdout.read(size))
    if reply.get("ok") is not True:
        raise RuntimeError(f"ping failed: {reply}")
    _, stderr = proc.communicate(b"", timeout=WAIT_S)
    return stderr.decode("utf-8", "replace")


class Ranked(NamedTuple):
    name: str
    self_us: float
    cumulative_us: float
    chain: tuple[str, ...]


def rank(runs: list[list[Node]]) -> list[Ranked]:
    """Per module: median self and cumulative time over runs; sorted by self time."""
    by_name: dict[str, list[Node]] = {}
    for nodes in runs:
        for node in nodes:
            by_name.setdefault(node.name, []).append(node)
    ranked = [
        Ranked(
            name,
            statistics.median(n.self_us for n in found),
            statistics.median(n.cumulative_us for n in found),
            found[0].chain,
        )
        for name, found in by_name.items()
    ]
    return sorted(ranked, key=lambda r: -r.self_us)


def pulled_by_first_party(ranked: list[Ranked]) -> dict[str, float]:
    """For each native_host module: its own time plus every module it was the nearest
    native_host importer of (what removing or deferring that import would save). Modules
    with no native_host importer are summed under the import that started them: the
    interpreter's own (site, encodings, runpy) or one made at run time by a function
    (`import platformdirs` in a function shows up as a root of its own)."""
    totals: dict[str, float] = {}
    for item in ranked:
        path = (*item.chain, item.name)
        owners = [m for m in path if m.split(".")[0] == FIRST_PARTY]
        owner = owners[-1] if owners else f"{path[0]} (not under a native_host import)"
        totals[owner] = totals.get(owner, 0.0) + item.self_us
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=30)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--command", nargs="+", help="the host's argv (default: this checkout with -X importtime)"
    )
    which.add_argument(
        "--venv",
        action="store_true",
        help="run a wheel of this checkout installed into a fresh venv (as users get it)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pedelec-imports-") as temp:
        root = Path(temp)
        python = sys.executable
        if args.venv:
            python = str(builds.build_wheel_venv(root / "build")[0] / "bin" / "python")
        command = args.command or [python, "-X", "importtime", "-m", "native_host"]
        env = user_env(os.environ, root / "world")
        home = pedelec_home(env)
        with DevCore(DevCoreSettings(home=home, generation="current")):
            one_start(command, env)  # warm-up: page cache, .pyc files written
            runs = [parse_importtime(one_start(command, env)) for _ in range(args.runs)]
    if not all(runs):
        print("no `import time:` lines on stderr: is -X importtime in effect?", file=sys.stderr)
        return 1
    ranked = rank(runs)
    total = statistics.median(sum(n.self_us for n in nodes) for nodes in runs)
    print(f"{' '.join(command)} {OFFICIAL_ORIGIN}, one ping, median of {args.runs} starts")
    print(f"{len(ranked)} modules, {total / 1000:.1f} ms of imports in all\n")
    print(f"{'self ms':>8} {'cum ms':>8}  module  <- imported via")
    for item in ranked[: args.top]:
        via = " <- ".join(reversed(item.chain)) if item.chain else "(at run time)"
        print(f"{item.self_us / 1000:8.2f} {item.cumulative_us / 1000:8.2f}  {item.name}  <- {via}")
    print("\nwhat each native_host module costs with everything it is the nearest importer of:")
    for module, micros in pulled_by_first_party(ranked).items():
        print(f"{micros / 1000:8.2f} ms  {module}")
    if args.json:
        data = {"command": command, "total_us": total, "modules": [r._asdict() for r in ranked]}
        args.json.write_text(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
