"""Where the host itself lives, judged by the rule the host applies to the program it
starts (launch/trust.py, docs/security.md "Programs the host starts"): the file a
manifest names, every folder and symlink from the root to it, a script's interpreter
(the launcher `install` writes names its Python in its `#!` line) and, on Windows, the
program's own folder (DLLs load from it first) must belong to the user (or root,
SYSTEM, Administrators) and be writable by nobody else. A host another user can swap
runs their code as this user at the browser's next start.

One rule, two readers: `install` refuses to register such a host, and `doctor` reports a
registration naming one as a failure (what the host refuses, doctor reports).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from native_host.launch import trust


def refusal(path: str, env: Mapping[str, str]) -> str | None:
    """Why another user could change what `path` runs (naming the file or folder), or
    None. A path that cannot be opened is not judged here (doctor's other checks say
    so)."""
    try:
        program = trust.open_trusted(path, env)
    except trust.UntrustedProgramError as exc:
        if _missing(exc):
            return None
        return f"{exc.path} {exc.why}"
    program.close()
    return None


def folder_refusal(path: str) -> str | None:
    """Why another user could change what is imported from the folder `path` (a
    launcher's import path), or None: the folder and every one on the way to it."""
    try:
        # `.` after it: check_chain checks every component followed by another.
        trust.check_chain(os.path.join(path, os.curdir))
    except trust.UntrustedProgramError as exc:
        if _missing(exc):
            return None
        return f"{exc.path} {exc.why}"
    return None


def _missing(exc: trust.UntrustedProgramError) -> bool:
    """Something on the way is not there or not a file (a deleted venv's interpreter):
    not this rule's to judge; doctor's start of the host says what is wrong."""
    return exc.violation == "executablePath" or exc.why.startswith(
        ("cannot be read", "is not on PATH", "is not a directory")
    )


def fix(problem: str) -> str:
    """What the user does about a `refusal`."""
    if sys.platform == "win32":
        return (
            "install it into a folder only you can change (the MSI's default, "
            "%LOCALAPPDATA%\\Programs), or remove other users' write access to the folder "
            "named (icacls), then register it again"
        )
    return (
        "move it into a folder only you can write (for example ~/.local/share), or make "
        "the one named writable by you alone (chmod go-w; for a folder you do not own, ask "
        "its owner), then register it again"
    )
