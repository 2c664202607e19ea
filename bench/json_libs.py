"""Would orjson or msgspec pay for themselves in the host? Data for that decision.

In a throwaway venv (never a dependency of the project) it installs both, then measures
- the import cost in a fresh `python -I` (median `-X importtime` cumulative of N starts),
  next to the stdlib `json` the host imports today;
- the relay's work per event at 200 B and 512 KiB, ASCII and mixed text (json_probe.py);
- what each does with the inputs the host's one JSON rule refuses;
- the installed size;
and prints, for each, after how many 200 B events a host's start-up extra is paid back.

Usage: python3 bench/json_libs.py [--runs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.builds import tree_bytes
from bench.imports import parse_importtime

PROBE = Path(__file__).resolve().parent / "json_probe.py"
PACKAGES = {"orjson": "orjson", "msgspec": "msgspec"}
"""library label -> PyPI name."""
IMPORTS = {"json (host codec)": "json", "orjson": "orjson", "msgspec": "msgspec.json"}
BASELINE = "json (host codec)"
RELAY_PRELUDE = "import os, socket, struct, sys, threading"
"""What any relay imports whatever its JSON library: import costs are measured on top."""


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
    return done.stdout + done.stderr


def import_ms(python: str, module: str, runs: int, prelude: str = "") -> float:
    """Median cumulative `-X importtime` of `module` in a fresh `python -I`, imported after
    `prelude` (whose own imports are then not counted)."""
    code = f"{prelude}\nimport {module}"
    samples = []
    for _ in range(runs + 1):
        nodes = parse_importtime(_run([python, "-I", "-X", "importtime", "-c", code]))
        samples.append(next(n.cumulative_us for n in nodes if n.name == module) / 1000)
    return statistics.median(samples[1:])


def installed_mib(site: Path, name: str) -> float:
    """Size of a package's files in site-packages (package dir and its .dist-info)."""
    entries = [p for p in site.iterdir() if p.name.split("-")[0].lower() == name]
    return sum(tree_bytes(p) if p.is_dir() else p.stat().st_size for p in entries) / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pedelec-json-libs-") as root:
        venv = Path(root) / "venv"
        _run([sys.executable, "-m", "venv", str(venv)])
        python = str(venv / "bin" / "python")
        _run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *PACKAGES.values(),
            ]
        )
        versions = json.loads(
            _run(
                [
                    python,
                    "-c",
                    "import json, importlib.metadata as m; print(json.dumps("
                    f"{{n: m.version(n) for n in {list(PACKAGES.values())!r}}}))",
                ]
            )
        )
        (site,) = (venv / "lib").glob("python3*/site-packages")
        sizes = {label: installed_mib(site, name) for label, name in PACKAGES.items()}
        imports = {
            label: {
                "fresh": import_ms(python, module, args.runs),
                "after relay prelude": import_ms(python, module, args.runs, RELAY_PRELUDE),
            }
            for label, module in IMPORTS.items()
        }
        probe = json.loads(_run([python, "-I", str(PROBE)]))
    libraries: dict[str, Any] = probe["libraries"]
    print(f"Python {probe['python']}; {', '.join(f'{k} {v}' for k, v in versions.items())}")
    print("import ms: median -X importtime cumulative in a fresh `python -I`, alone / after")
    print(f"  `{RELAY_PRELUDE}`; us per event: best of 5, decode / encode / decode+wrap+encode")
    for label, data in libraries.items():
        cost = imports[label]
        size = f"{sizes[label]:.2f} MiB installed" if label in sizes else "stdlib"
        print(
            f"\n{label}: import {cost['fresh']:.2f} / {cost['after relay prelude']:.2f} ms; {size}"
        )
        for payload, steps in data["us"].items():
            print(f"  {payload:<14} " + "  ".join(f"{k} {v:9.1f}" for k, v in steps.items()))
    print("\npay-back: extra import time / time saved per relayed event")
    base = libraries[BASELINE]["us"]
    base_import = imports[BASELINE]["after relay prelude"]
    for label, data in libraries.items():
        if label == BASELINE:
            continue
        extra_ms = imports[label]["after relay prelude"] - base_import
        for payload in ("200 B ascii", "512 KiB mixed"):
            saved = base[payload]["relay"] - data["us"][payload]["relay"]
            events = extra_ms * 1000 / saved if saved > 0 else float("inf")
            print(
                f"  {label}, {payload}: +{extra_ms:.2f} ms per start, -{saved:.1f} us per "
                f"event: paid back after {events:,.0f} events"
            )
    print("\nwhat each does with what the host refuses as invalid JSON (it accepts 2**70):")
    for label, data in libraries.items():
        print(f"  {label}: " + "; ".join(f"{k}: {v}" for k, v in data["inputs"].items()))
    if args.json:
        record = {"versions": versions, "sizes_mib": sizes, "import_ms": imports, **probe}
        args.json.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
