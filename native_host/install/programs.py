"""Is a browser installed? Its user data dir says it has been started; its program, at a
place of the locations table (`locations.PROGRAMS`), says it is installed even before
its first start.

A program counts only when nobody but the user or root could have put it there: the
host's own rule for a program it would start (`launch.trust`: every folder and link on
the way and the file itself belong to the user or root and are writable by nobody
else). Another user who can write `/opt` could otherwise plant a "browser" and have
`install` register it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath

from native_host.install import locations
from native_host.install.locations import BrowserRow
from native_host.launch import trust


@dataclass(frozen=True)
class Found:
    """The browser's program, if one counts, and every other one present but refused."""

    program: Path | None
    refused: tuple[str, ...] = ()
    """`<path> <why>` for each program present that another user could have planted."""


def local_path(program: locations.Program, root: Path) -> Path:
    """Where a program of the table is on this machine: a system path under `root` (tests
    put a whole machine there), a path under a variable's folder as it is."""
    path = Path(program.path.as_posix()) if not isinstance(program.path, Path) else program.path
    if program.system and root != Path("/"):
        return root / PurePosixPath(path.as_posix()).relative_to("/")
    return path


def find_program(
    row: BrowserRow, env: Mapping[str, str], home: PurePath, root: Path = Path("/")
) -> Found:
    """The first program of the row that is there and trusted (see the module's doc)."""
    refused: list[str] = []
    for program in locations.row_programs(row, env, home):
        path = local_path(program, root)
        if not os.path.lexists(path):
            continue
        try:
            trust.open_trusted(str(path), env).close()
        except trust.UntrustedProgramError as exc:
            refused.append(f"{exc.path} {exc.why}")
            continue
        except OSError as exc:
            refused.append(f"{path}: {exc.strerror or exc}")
            continue
        return Found(path, tuple(refused))
    return Found(None, tuple(refused))
