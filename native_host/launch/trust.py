"""Run only what the user owns: the checks on the program a launch starts (docs/security.md).

`app-launch.json` names the Desktop's executable. Before the host starts it, every
directory and symlink on the way to it, the file itself and (for a script) its
interpreter must belong to the user or root and be writable by nobody else: otherwise
another local user could make the host run their code as this user. Sticky directories
(like /tmp) are fine: others cannot replace what is ours inside them. Group write is
fine for the user's private group and for the administrators' group that owns system
folders (macOS's `admin` owns /Applications) — per-OS facts, kept as data.

The file checked is the file started: it is opened once and checked through its
descriptor, and on Linux a binary is executed through that descriptor
(`/proc/<host pid>/fd/N`, so the child inherits nothing), so no rename in between can
swap it. A script is executed by its checked path (its interpreter needs a path it can
open, and `$0` must stay meaningful); the checks on every directory leading to it are
what keep others from replacing it.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

from native_host import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

ADMIN_GROUPS: dict[str, frozenset[int]] = {
    "linux": frozenset({0}),
    "darwin": frozenset({0, 80}),  # wheel, admin (owner of /Applications)
}
"""Groups whose write bit on a system folder does not let an ordinary user in."""
EXEC_THROUGH_DESCRIPTOR = sys.platform.startswith("linux")
"""Where a binary can be executed through the host's descriptor (/proc); elsewhere the
checked path is executed."""
MAX_SYMLINK_HOPS = 40
SHEBANG_BYTES = 256


class UntrustedProgramError(Exception):
    """A program the host refuses to start; `violation` is the §4.3 word for it."""

    def __init__(self, violation: str, path: str, why: str) -> None:
        super().__init__(f"{path} {why}")
        self.violation = violation
        self.path = path
        self.why = why


class TrustedProgram:
    """A checked executable, held open so that what runs is what was checked."""

    __slots__ = ("fd", "path", "script")

    def __init__(self, path: str, fd: int, script: bool) -> None:
        self.path = path
        """The path as configured (symlinks included): what a script is executed by."""
        self.fd = fd
        self.script = script

    @property
    def exec_path(self) -> str:
        """What to hand to execve: the host's descriptor for a binary where the OS allows
        it (valid until the exec has happened, which `Popen` waits for), else the path."""
        if EXEC_THROUGH_DESCRIPTOR and not self.script:
            return f"/proc/{os.getpid()}/fd/{self.fd}"
        return self.path

    def close(self) -> None:
        os.close(self.fd)


def _group_ok(gid: int, directory: bool) -> bool:
    """Group write lets nobody else in: the user's private group, or (for a system
    folder only) the administrators' group."""
    admins = ADMIN_GROUPS.get(sys.platform, frozenset({0}))
    return (directory and gid in admins) or files.is_private_group(gid)


def _check(path: str, info: os.stat_result, what: str, violation: str) -> None:
    """Owned by the user or root, writable by nobody else (sticky directories excepted)."""
    if files.IS_WINDOWS:  # pragma: no cover - Windows only: the Windows lane runs it
        if not stat.S_ISLNK(info.st_mode):
            kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
            _check_acl(path, what, violation, kind)
        return
    if info.st_uid not in (os.geteuid(), 0):
        raise UntrustedProgramError(violation, path, f"({what}) belongs to another user")
    if stat.S_ISLNK(info.st_mode):
        return  # a symlink's own mode bits mean nothing; its directory was checked
    if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
        return
    directory = stat.S_ISDIR(info.st_mode)
    if info.st_mode & stat.S_IWOTH or (
        info.st_mode & stat.S_IWGRP and not _group_ok(info.st_gid, directory)
    ):
        raise UntrustedProgramError(violation, path, f"({what}) is writable by other users")


def _check_acl(path: str, what: str, violation: str, kind: str) -> None:  # pragma: no cover
    """The Windows rule: owner and DACL (native_host/windows_acl.py); `kind` is one of
    its FILE, DIRECTORY or PROGRAM_FOLDER."""
    from native_host import windows_acl

    found = windows_acl.refusal(path, kind)
    if found is not None:
        reason, detail = found
        why = {
            windows_acl.FOREIGN_OWNER: "belongs to another user",
            windows_acl.WRITABLE: "is writable by other users",
        }.get(reason, "cannot be checked")
        raise UntrustedProgramError(violation, path, f"({what}) {why}: {detail}")


def split_root(path: str, flavour: ModuleType = os.path) -> tuple[str, list[str]]:
    """The root a walk to `path` starts from and the names after it, by `flavour`'s rules
    (`os.path`; tests pass `ntpath` or `posixpath`). On Windows the root is a drive and its
    root (`C:\\`), a share (`\\\\server\\share\\`) or either behind `\\\\?\\`;
    a path without both a drive and a root (`C:x`, `\\x`) depends on a current
    directory, so it has none: ValueError."""
    drive, rest = flavour.splitdrive(path)
    if flavour.altsep:
        rest = rest.replace(flavour.altsep, flavour.sep)
    if not rest.startswith(flavour.sep) or (flavour.sep == "\\" and not drive):
        raise ValueError(f"{path} is not an absolute path")
    return drive + flavour.sep, [part for part in rest.split(flavour.sep) if part]


def check_chain(
    path: str, violation: str = "executableDirectory", missing: str = "executablePath"
) -> str:
    """Check every directory and symlink from the root to `path`; return the resolved path.

    The final file is returned unchecked (its checks run on the opened descriptor).
    `violation` names an untrusted step, `missing` a step that is not there.
    """
    try:
        current, pending = split_root(path)
    except ValueError:
        raise UntrustedProgramError(violation, path, "is not an absolute path") from None
    _check(current, os.stat(current), "the root directory", violation)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
        except OSError as exc:
            raise UntrustedProgramError(missing, candidate, f"cannot be read: {exc}") from None
        if stat.S_ISLNK(info.st_mode):
            _check(candidate, info, "a symlink on the way", violation)
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise UntrustedProgramError(violation, path, "has too many symlinks")
            current, pending = _follow(current, os.readlink(candidate), pending, violation)
            continue
        if pending:
            if not stat.S_ISDIR(info.st_mode):
                raise UntrustedProgramError(missing, candidate, "is not a directory")
            _check(candidate, info, "a directory on the way", violation)
        current = candidate
    return current


def _follow(current: str, target: str, pending: list[str], violation: str) -> tuple[str, list[str]]:
    """Where the walk goes on after a symlink in `current` pointing at `target`: from the
    target's own root, from the current drive's root (a Windows `\\x`), or from `current`."""
    try:
        root, parts = split_root(target)
    except ValueError:
        drive, rest = os.path.splitdrive(target)
        if drive:  # `C:x`: relative to a current directory of drive C:
            raise UntrustedProgramError(violation, target, "is not absolute") from None
        rest = rest.replace(os.path.altsep, os.sep) if os.path.altsep else rest
        root = os.path.splitdrive(current)[0] + os.sep if rest.startswith(os.sep) else current
        parts = [part for part in rest.split(os.sep) if part]
    return root, parts + pending


def _head(fd: int) -> bytes:
    """The file's first bytes: seek and read (Windows has no `os.pread`)."""
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, SHEBANG_BYTES)


def _interpreter_of(fd: int, env: Mapping[str, str]) -> str | None:
    """The absolute interpreter a `#!` script names (through `env NAME` too), or None."""
    head = _head(fd)
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace").split()
    if not words:
        raise UntrustedProgramError("interpreter", "#!", "names no interpreter")
    interpreter = words[0]
    if os.path.basename(interpreter) != "env":
        return interpreter
    names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not names:
        return interpreter
    import shutil

    found = shutil.which(names[0], path=env.get("PATH", os.defpath))
    if found is None:
        raise UntrustedProgramError("interpreter", names[0], "is not on PATH")
    return found


def open_trusted(executable: str, env: Mapping[str, str]) -> TrustedProgram:
    """Check and open the program to start; `UntrustedProgramError` says what is wrong."""
    real = check_chain(executable)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)  # Windows: no text-mode translation of the head
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        why = "changed while it was checked" if exc.errno == errno.ELOOP else str(exc)
        raise UntrustedProgramError("executablePath", real, why) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedProgramError("executablePath", real, "is not a regular file")
        _check(real, info, "the executable", "executablePermissions")
        if files.IS_WINDOWS:  # pragma: no cover - DLLs load from the program's folder first
            folder = os.path.dirname(real)
            _check_acl(folder, "the program's folder", "executableDirectory", "program folder")
        interpreter = _interpreter_of(fd, env)
        if interpreter is not None:
            checked = check_chain(interpreter, "interpreter", "interpreter")
            _check(checked, os.stat(checked), "the script's interpreter", "interpreter")
    except BaseException:
        os.close(fd)
        raise
    return TrustedProgram(executable, fd, script=interpreter is not None)
