"""The PyInstaller onedir bundle of packaging/pedelec-native-host.spec that the Linux and
macOS release builds ship, built by PyInstaller from the hash-locked build environment
(locked.py: PyInstaller, its bootloader and the host's dependencies exactly as
packaging/locks/build.txt pins them) on the interpreter that runs the build.

Stdlib only, like every build script here: it runs before anything is installed. (The
Windows build, packaging/windows/build.py, bundles the embeddable CPython instead;
docs/performance.md says why.)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import locked
from archives import source_date_epoch
from steps import REPO, BuildError, project_version, run

SPEC = REPO / "packaging" / "pedelec-native-host.spec"
BUNDLE_NAME = "pedelec-native-host"
"""The onedir folder and its executable, as the spec names both."""


def build_bundle(dist: Path, work: Path) -> Path:
    """dist/pedelec-native-host/, freshly built (an old one is replaced) in `work`, and
    checked to start: returns its executable."""
    python = locked.environment(work)
    bundle = dist / BUNDLE_NAME
    shutil.rmtree(bundle, ignore_errors=True)
    run([
        python, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
        "--distpath", dist, "--workpath", work, SPEC,
    ], cwd=REPO, env=reproducible_environment(), timeout=1800)  # fmt: skip
    executable = bundle / BUNDLE_NAME
    printed = run([executable, "version"], timeout=120).strip()
    if project_version() not in printed:
        raise BuildError(f"{executable} version printed {printed!r}, not {project_version()}")
    return executable


def reproducible_environment() -> dict[str, str]:
    """PyInstaller's environment for a build two clones of one commit agree on byte for
    byte (PyInstaller's own advice): a fixed string hash (marshal writes a frozenset
    constant of a .pyc in its iteration order) and the commit's time as
    SOURCE_DATE_EPOCH."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
    return {**env, "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": str(source_date_epoch())}
