"""What every release build script shares (packaging/linux, packaging/macos,
packaging/windows): the error that ends a build, the one way a build step runs a
program, the version every artifact is named by, and the command line
`build.py [--out DIR] [--work DIR]`.

Stdlib only, like every build script here: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


class BuildError(RuntimeError):
    """A step failed: the message says which and why."""


def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> str:
    """Run one build command and return what it printed; its failure ends the build with
    its own output. Every stdio is a pipe or /dev/null (a Windows program under Wine
    fails to start with a Unix file as stdout), and output that is not UTF-8 is shown,
    not raised."""
    words = [os.fspath(c) for c in command]
    done = subprocess.run(
        words, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    output = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        shown = " ".join(words)
        errors = done.stderr.decode("utf-8", "replace")
        raise BuildError(f"`{shown}` failed ({done.returncode}):\n{output}{errors}")
    return output


def project_table(source: Path = REPO) -> dict[str, object]:
    """The `[project]` table of `source`'s pyproject.toml."""
    document = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
    project: dict[str, object] = document["project"]
    return project


def project_version(source: Path = REPO) -> str:
    """`[project] version` of pyproject.toml: what every artifact's name carries."""
    return str(project_table(source)["version"])


def main(
    argv: Sequence[str] | None,
    *,
    doc: str | None,
    build: Callable[[Path, Path], Path],
    system: str,
    work_help: str,
    errors: tuple[type[Exception], ...] = (),
) -> int:
    """A build script's command line: `build(out, work)` with dist/<system> and
    build/<system>-build as defaults; a failed step is one message and exit status 1."""
    parser = argparse.ArgumentParser(description=(doc or "").partition("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist" / system, metavar="DIR")
    parser.add_argument(
        "--work", type=Path, default=REPO / "build" / f"{system}-build", metavar="DIR",
        help=work_help,
    )  # fmt: skip
    args = parser.parse_args(argv)
    caught: tuple[type[Exception], ...] = (BuildError, OSError, *errors)
    try:
        build(args.out.resolve(), args.work.resolve())
    except caught as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    return 0
