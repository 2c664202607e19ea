"""The host builds under test, made the way users get them, and what they weigh.

- venv: a wheel built from this checkout, installed with pip into a fresh `python -m venv`
  (as `installers/install.sh` makes it, pip and setuptools seeded), then registered with
  its own `pedelec-native-host install`: the manifest's `path` (the launcher `install`
  writes) is what Chrome runs, so that is what is measured;
- bundle: a PyInstaller onedir build given with `--bundle`, run as its executable (what
  a frozen `install` registers);
- relay: `relay_host.py` behind a `#!<this interpreter> -IS` line, the start-up floor
  for CPython; echo: `echo_host.py` the same way, the floor for streaming.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
ECHO_SOURCE = Path(__file__).resolve().parent / "echo_host.py"
RELAY_SOURCE = Path(__file__).resolve().parent / "relay_host.py"
MANIFEST_NAME = "cc.isaaclin.pedelec.json"
NOT_SOURCE = (".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".venv")
"""Left out of the copy a wheel is built from: build output, caches, git."""
SEEDED_BY_VENV = ("pip", "setuptools", "pkg_resources", "_distutils_hack")
"""Top-level site-packages entries `python -m venv` seeds, not the host's own."""
STEP_TIMEOUT_S = 600


class Variant(NamedTuple):
    """One thing that answers as a native host: a label and the argv Chrome would run."""

    label: str
    command: tuple[str, ...]
    baseline: bool = False


class BuildError(RuntimeError):
    """A build or registration step failed; the text carries its output."""


def _run(command: list[str], env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise BuildError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def build_wheel_venv(root: Path, venv: Path) -> tuple[Path, float]:
    """A venv at `venv` holding the host installed from a wheel of this checkout; seconds
    it took.

    The wheel is built from a copy of the working tree: setuptools builds in the source's
    `build/lib` and packages whatever is there, so a module deleted since an earlier build
    would still ship from the checkout itself. The venv itself goes where `install` takes
    it for a lasting install (the caller passes a directory outside every temporary one,
    wherever the checkout is), so its launcher is the one users get (`python -I -S` with
    the install's paths).
    """
    started = time.monotonic()
    source, wheels = root / "source", root / "wheels"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)])
    (wheel,) = wheels.glob("pedelec_native_host-*.whl")
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install", str(wheel)])
    return venv, time.monotonic() - started


def registered_path(
    host: Path, env: Mapping[str, str], profile: Path, extension_id: str | None = None
) -> str:
    """What `<host> install --user-data-dir <profile>` puts in the manifest's `path`.

    The bench's venv is a lasting one (bench/run.py puts it under the account's home), so
    `install` writes the launcher users get.
    """
    extra = ["--extension-id", extension_id] if extension_id else []
    _run([str(host), "install", "--user-data-dir", str(profile), *extra], env)
    manifest = json.loads((profile / "NativeMessagingHosts" / MANIFEST_NAME).read_text())
    path: str = manifest["path"]
    return path


def echo_executable(directory: Path) -> Path:
    """The echo host as an executable script run with `python -I -S` (spelt `-IS`: Linux
    passes a shebang's options as one argument)."""
    return _script(directory / "echo-host", ECHO_SOURCE)


def relay_executable(directory: Path) -> Path:
    """The minimal relay as an executable script run with `python -I -S`."""
    return _script(directory / "relay-host", RELAY_SOURCE)


def _script(script: Path, source: Path) -> Path:
    script.write_text(f"#!{sys.executable} -IS\n" + source.read_text())
    script.chmod(0o755)
    return script


def tree_bytes(path: Path, skip_top: tuple[str, ...] = ()) -> int:
    """Apparent size of the files under `path` (symlinks not followed), minus the
    top-level entries named in `skip_top`."""
    total = 0
    for entry in path.iterdir():
        if entry.name in skip_top:
            continue
        if entry.is_symlink() or entry.is_file():
            total += entry.lstat().st_size
        elif entry.is_dir():
            for folder, _, files in os.walk(entry):
                total += sum(os.lstat(os.path.join(folder, name)).st_size for name in files)
    return total


def venv_sizes(venv: Path) -> dict[str, int]:
    """The whole venv, and the venv without what `python -m venv` seeded."""
    (site,) = (venv / "lib").glob("python3*/site-packages")
    outside_site = tree_bytes(venv) - tree_bytes(site)
    own = tree_bytes(site, skip_top=tuple(_seeded_entries(site)))
    return {"total": tree_bytes(venv), "without_pip_setuptools": outside_site + own}


def _seeded_entries(site: Path) -> list[str]:
    names = []
    for entry in site.iterdir():
        stem = entry.name.split("-", 1)[0]
        if stem in SEEDED_BY_VENV or entry.name == "distutils-precedence.pth":
            names.append(entry.name)
    return names
