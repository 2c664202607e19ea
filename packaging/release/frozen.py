"""What the Linux and macOS release builds share: the PyInstaller onedir bundle of
packaging/pedelec-native-host.spec, built with the interpreter that runs the build, and
the project's version (the artifacts are named by it).

Stdlib only, like every build script here: it runs before anything is installed but
PyInstaller. (The Windows build, packaging/windows/build.py, bundles the embeddable
CPython instead; docs/performance.md says why.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SPEC = REPO / "packaging" / "pedelec-native-host.spec"
BUNDLE_NAME = "pedelec-native-host"
"""The onedir folder and its executable, as the spec names both."""


class BuildError(RuntimeError):
    """A step failed: the message says which and why."""


def run(
    command: Sequence[str | os.PathLike[str]], cwd: Path | None = None, timeout: float = 600
) -> str:
    """Run one build command; its failure ends the build with its own output."""
    words = [os.fspath(c) for c in command]
    done = subprocess.run(
        words, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        shown = " ".join(words)
        raise BuildError(f"`{shown}` failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def project_version(source: Path = REPO) -> str:
    """`[project] version` of pyproject.toml: what every artifact's name carries."""
    project = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return str(project["version"])


def build_bundle(dist: Path, work: Path) -> Path:
    """dist/pedelec-native-host/, freshly built (an old one is replaced), and checked to
    start: returns its executable."""
    bundle = dist / BUNDLE_NAME
    shutil.rmtree(bundle, ignore_errors=True)
    run([
        sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
        "--distpath", dist, "--workpath", work, SPEC,
    ], cwd=REPO, timeout=1800)  # fmt: skip
    executable = bundle / BUNDLE_NAME
    printed = run([executable, "version"], timeout=120).strip()
    if project_version() not in printed:
        raise BuildError(f"{executable} version printed {printed!r}, not {project_version()}")
    return executable
