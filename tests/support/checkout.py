"""This checkout as installers see it: a fresh copy of its files, and a place to install
into that is not temporary."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def fresh_checkout(dest: Path) -> Path:
    """The current files of this tree as a fresh clone would have them once committed:
    tracked and new files, without anything git ignores (.venv, build/, dist/, caches)."""
    if (REPO / ".git").exists():
        listed = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        for name in filter(None, listed.stdout.split("\0")):
            source = REPO / name
            if source.is_file():  # a tracked file deleted in the work tree is not copied
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest / name)
    else:  # running from an unpacked sdist
        junk = shutil.ignore_patterns(".venv", "build", "dist", "*.egg-info", "__pycache__")
        shutil.copytree(REPO, dest, ignore=junk, dirs_exist_ok=True)
    return dest


INSTALLS = REPO / "build" / "test-installs"
"""Where the tests' real installs live: in this checkout's build/, which git ignores
and no build walks, never in the home of the person running the suite (issue 33)."""


@contextlib.contextmanager
def permanent_directory() -> Iterator[Path]:
    """A new directory outside every temporary directory, removed afterwards.

    `install` rightly refuses an interpreter that lives in a temporary directory, so the
    pipx, uv and install.sh installs that stand for a user's real one go under
    `INSTALLS`. Each gets its own name, so tests running at the same time never share
    (or remove) a parent."""
    temporary = Path(tempfile.gettempdir()).resolve()
    if INSTALLS.resolve().is_relative_to(temporary):
        raise RuntimeError(
            f"this checkout is in a temporary directory ({REPO}): the tests of real installs "
            "need one that lasts, as a user's install does; clone it somewhere else"
        )
    INSTALLS.mkdir(parents=True, exist_ok=True)
    path = INSTALLS / uuid.uuid4().hex
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
