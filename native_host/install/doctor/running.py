"""Which version a registration runs, and whether hosts of an older one still run
(issue 30).

A host that started before an upgrade keeps running the version it started with until
its browser closes the port (native_host/startimage.py), which can be hours later; the
files of that version stay until then (native_host/versions.py). These findings say so,
so that neither looks like a failed upgrade: the version the registered host runs now
(it is asked, `<host> version`), and the older versions whose hosts still hold their
start image.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from native_host import __version__, files, startimage, versions
from native_host.install.doctor.report import Finding, Status

VERSION_TIMEOUT_S = 15.0
PREFIX = "pedelec-native-host "


def registered_version(host: Path, env: Mapping[str, str]) -> str | None:
    """What `<host> version` prints (the version the next start runs), or None."""
    try:
        done = subprocess.run(
            [str(host), "version"],
            capture_output=True,
            text=True,
            env=dict(env),
            cwd=str(host.parent),
            stdin=subprocess.DEVNULL,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    line = done.stdout.strip()
    if done.returncode != 0 or not line.startswith(PREFIX):
        return None
    return line.removeprefix(PREFIX)


def _held_elsewhere(path: str) -> bool:
    """Some other process holds this image (this doctor may hold its own)."""
    return path != startimage.held_path() and files.in_use(path)


def version_findings(subject: str, host: Path, env: Mapping[str, str]) -> list[Finding]:
    """The registered host's version, and each older version still running."""
    version = registered_version(host, env)
    if version is None:
        return []  # the self-test has said why it does not start
    found = []
    if version == __version__:
        found.append(Finding(Status.OK, subject, "host version", version))
    else:
        found.append(
            Finding(
                Status.WARN,
                subject,
                "host version",
                f"{version}, not this doctor's {__version__}",
                "run `install` from the installation you mean the browser to use",
            )
        )
    image = host.parent / startimage.IMAGE_NAME
    image_path = str(image) if image.is_file() else None
    running: list[tuple[str, str]] = []
    if image_path is not None and _held_elsewhere(image_path):
        written = startimage.written_version(image_path)
        if written is not None and written != version:
            running.append((written, image_path))
    for path in versions.retired_of(str(host), image_path):
        if versions.folder_in_use(path) if Path(path).is_dir() else _held_elsewhere(path):
            running.append((versions.retired_version(path), path))
    for old, where in running:
        found.append(
            Finding(
                Status.WARN,
                subject,
                "older hosts running",
                f"hosts of version {old} still run (from {where}), started before the "
                f"upgrade to {version}; they keep working until their browser closes them",
                "nothing to do: new connections run the new version, and the old files "
                "are removed when the last of those hosts exits (restart the browser to "
                "end them now)",
            )
        )
    return found
