"""The local files the host trusts: one safe reader, one atomic write, one lock, one
private-directory rule (docs/security.md).

Every file the host or `doctor` reads (`runtime.json`, `app-launch.json`, `config.json`,
`origins.json`, the install record) goes through `read_trusted`, modelled on OpenSSH's
StrictModes: no symlink is followed, only a regular file is read, a FIFO never blocks,
the file and its directory must belong to the user (or root) and must not be writable by
anybody else, and the read is bounded. A refusal says which rule failed and where, so
the host's error and `doctor`'s finding carry the same words.

Written with `os` only: this module is on the relay's start-up path.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

IS_WINDOWS = sys.platform == "win32"
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
DEFAULT_MAX_BYTES = 1_048_576
"""No file the host reads is legitimately larger than this."""

# --- why a file was refused (stable words: logs, error details and `doctor`) -----------
MISSING = "missing"
SYMLINK = "symlink"
NOT_REGULAR = "not_regular"
FOREIGN_OWNER = "foreign_owner"
WRITABLE = "writable_by_others"
DIR_FOREIGN_OWNER = "directory_foreign_owner"
DIR_WRITABLE = "directory_writable_by_others"
TOO_LARGE = "too_large"
RESOURCES = "resources_exhausted"
UNREADABLE = "unreadable"

_WRITE_FIX = (
    "remove the other users' entries from the permissions of" if IS_WINDOWS else "chmod go-w"
)
_EXPLANATIONS = {
    MISSING: "does not exist",
    SYMLINK: "is a symbolic link (refused: it could point anywhere)",
    NOT_REGULAR: "is not a regular file",
    FOREIGN_OWNER: "belongs to another user",
    WRITABLE: f"is writable by other users ({_WRITE_FIX} it)",
    DIR_FOREIGN_OWNER: "is in a directory that belongs to another user",
    DIR_WRITABLE: f"is in a directory writable by other users ({_WRITE_FIX} the directory)",
    TOO_LARGE: "is larger than the host ever reads",
    RESOURCES: "could not be opened: the process is out of file descriptors",
    UNREADABLE: "cannot be read",
}

_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


class FileRefusedError(Exception):
    """A file the host will not use, with the rule that failed (`reason`) and the OS
    text where there is one (`detail`)."""

    def __init__(self, path: str, reason: str, detail: str = "") -> None:
        self.path = path
        self.reason = reason
        self.detail = detail
        super().__init__(self.explanation)

    @property
    def explanation(self) -> str:
        """`<path> <why>`, e.g. `/home/u/.pedelec/runtime.json is a symbolic link ...`."""
        text = f"{self.path} {_EXPLANATIONS.get(self.reason, self.reason)}"
        return f"{text}: {self.detail}" if self.detail else text


def _user_ids() -> frozenset[int]:
    """Owners a file may have: the user, or root (a root-owned file is as trusted as the
    system itself)."""
    return frozenset({os.geteuid(), 0})


def is_private_group(gid: int) -> bool:
    """A user-private group (Debian and Ubuntu give each user one, with umask 002): the
    user's own primary group with no other member, so its write bit lets nobody else in.
    The same exception Debian's OpenSSH makes to StrictModes."""
    if gid != os.getegid():
        return False
    try:
        import grp
        import pwd

        members = set(grp.getgrgid(gid).gr_mem)
        name = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, OSError):
        return False
    return members <= {name}


def check_stat(
    path: str, info: os.stat_result, directory: bool = False, fd: int | None = None
) -> None:
    """Refuse what another user owns or can write (the rule every trusted path obeys).
    On Windows the owner and the DACL decide (of the open `fd` when given)."""
    if IS_WINDOWS:  # pragma: no cover - Windows only: the Windows lane runs it
        _check_windows(path, directory, fd)
        return
    if info.st_uid not in _user_ids():
        raise FileRefusedError(path, DIR_FOREIGN_OWNER if directory else FOREIGN_OWNER)
    if directory and info.st_mode & stat.S_ISVTX:
        return  # sticky: others cannot replace or rename what is ours inside it
    if info.st_mode & stat.S_IWOTH or (
        info.st_mode & stat.S_IWGRP and not is_private_group(info.st_gid)
    ):
        raise FileRefusedError(path, DIR_WRITABLE if directory else WRITABLE)


_WINDOWS_REASONS = {
    (False, "foreign_owner"): FOREIGN_OWNER,
    (True, "foreign_owner"): DIR_FOREIGN_OWNER,
    (False, "writable_by_others"): WRITABLE,
    (True, "writable_by_others"): DIR_WRITABLE,
}


def _check_windows(path: str, directory: bool, fd: int | None) -> None:  # pragma: no cover
    from native_host import windows_acl

    found = windows_acl.refusal(path, windows_acl.DIRECTORY if directory else windows_acl.FILE, fd)
    if found is not None:
        reason, detail = found
        raise FileRefusedError(path, _WINDOWS_REASONS.get((directory, reason), UNREADABLE), detail)


def check_directory(path: str) -> None:
    """The directory holding a trusted file: ours (or root's), writable only by us."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileRefusedError(path, MISSING) from None
    except OSError as exc:
        raise _os_refusal(path, exc) from None
    check_stat(path, info, directory=True)


def _os_refusal(path: str, exc: OSError) -> FileRefusedError:
    if exc.errno in _RESOURCE_ERRNOS:
        return FileRefusedError(path, RESOURCES, exc.strerror or str(exc))
    return FileRefusedError(path, UNREADABLE, exc.strerror or str(exc))


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)


def read_trusted(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of a file the user alone controls; `FileRefusedError` saying why not.

    The checks apply to the opened descriptor (fstat), so what is checked is what is
    read: no gap between check and use. Its directory is checked by path: a directory
    another user can write lets them swap the file after any check.
    """
    return read_trusted_stat(path, max_bytes)[0]


def read_trusted_stat(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[bytes, os.stat_result]:
    """`read_trusted`, plus the status of the very file read (for change detection)."""
    name = os.fspath(path)
    fd, info = open_trusted(name, max_bytes)
    try:
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(65_536, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise FileRefusedError(name, TOO_LARGE, f"more than {max_bytes} bytes")
        return b"".join(chunks), info
    except OSError as exc:
        raise _os_refusal(name, exc) from None
    finally:
        os.close(fd)


def open_trusted(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES, held: bool = False
) -> tuple[int, os.stat_result]:
    """The open descriptor of a file `read_trusted` would read, checked the same way, and
    its status; the caller reads and closes it (the start image keeps its own open).
    `held`: for a file a host keeps open while it runs (`hold_shared`): on Windows it is
    opened sharing renaming and deletion, so an `install` or `uninstall` meanwhile can
    move or remove it, the open handle still reading what it held."""
    name = os.fspath(path)
    if IS_WINDOWS and os.path.islink(name):  # pragma: no cover - no O_NOFOLLOW there
        raise FileRefusedError(name, SYMLINK)
    try:
        fd = _open_held(name) if held else os.open(name, _OPEN_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise FileRefusedError(name, MISSING) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefusedError(name, SYMLINK) from None
        raise _os_refusal(name, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefusedError(name, NOT_REGULAR)
        check_stat(name, info, directory=False, fd=fd)
        check_directory(os.path.dirname(os.path.abspath(name)))
        if info.st_size > max_bytes:
            raise FileRefusedError(name, TOO_LARGE, f"{info.st_size} bytes, limit {max_bytes}")
    except OSError as exc:
        os.close(fd)
        raise _os_refusal(name, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def ensure_private_dir(path: str | os.PathLike[str]) -> None:
    """Create a directory (and missing parents) as 0700 whatever the umask, or check an
    existing one is ours and not writable by others (`FileRefusedError` otherwise)."""
    name = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    probe = name
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _os_refusal(directory, exc) from None
        if not IS_WINDOWS:
            os.chmod(directory, PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask
    check_directory(name)


def atomic_write(path: str | os.PathLike[str], data: bytes, mode: int = PRIVATE_FILE_MODE) -> None:
    """Replace a file in one step (temp file in the same directory, fsync, rename), with
    `mode` whatever the umask: a reader sees the old content or the new, never half."""
    name = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(name))
    temp = os.path.join(directory, f".{os.path.basename(name)}.{os.urandom(6).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temp, flags | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if not IS_WINDOWS:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if IS_WINDOWS:  # pragma: no cover
            os.chmod(temp, mode)
        os.replace(temp, name)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable; best effort (Windows cannot open a directory)."""
    if IS_WINDOWS:  # pragma: no cover
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def hold_shared(fd: int) -> None:
    """Mark the open file as used by this process until it exits (issue 30): a shared
    lock on POSIX (waiting while a remover holds it exclusively); on Windows the open
    handle itself (`open_trusted(..., held=True)`), which lets nobody open the file for
    themselves alone. What `in_use` sees."""
    _hold(fd)


def let_go(fd: int) -> None:
    """Undo `hold_shared` on an open file (on Windows only closing it does: the caller
    that cannot remove its own files there keeps it open)."""
    _let_go(fd)


def in_use(path: str | os.PathLike[str]) -> bool:
    """Whether a process holds this file with `hold_shared` (on Windows: holds it open at
    all). False for a file that is not there."""
    return _in_use(os.fspath(path))


class FileLock:
    """An exclusive advisory lock on a lock file, shared by every process of this user.

    The descriptor is not inherited by children (a launched Desktop never holds it), and
    process exit releases the lock, even after SIGKILL.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd: int | None = None
        self._held = False

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; False only when `blocking` is off and another process holds it.
        OSError when no lock file can be used at all."""
        if self._fd is None:
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            self._fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            _lock(self._fd, blocking)
        except (BlockingIOError, PermissionError):
            if blocking:
                raise
            return False
        self._held = True
        return True

    def release(self) -> None:
        """Release the lock (if held) and close the file."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if self._held:
            self._held = False
            _unlock(fd)
        os.close(fd)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


if sys.platform == "win32":  # pragma: no cover - Windows only
    import msvcrt

    _LOCK_RETRIES = 6
    """LK_LOCK gives up after about 10 s; retry for about a minute in blocking mode."""

    def _lock(fd: int, blocking: bool) -> None:
        for attempt in range(_LOCK_RETRIES if blocking else 1):
            os.lseek(fd, 0, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK, 1)
                return
            except OSError as exc:
                if not blocking:
                    raise BlockingIOError(str(exc)) from None
                if attempt == _LOCK_RETRIES - 1:
                    raise

    def _unlock(fd: int) -> None:
        """Windows wants a region unlocked before its handle closes."""
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass

    FILE_SHARE_READ = 0x1
    FILE_SHARE_DELETE = 0x4
    FILE_FLAG_OPEN_REPARSE_POINT = 0x00200000

    def _open_held(name: str) -> int:
        """Read-only, sharing reading, renaming and deletion but not writing (nobody
        changes it in place while it is held); a link is opened as itself, not followed
        (O_NOFOLLOW's part); not inherited."""
        import _winapi

        handle = _winapi.CreateFile(
            name,
            _winapi.GENERIC_READ,
            FILE_SHARE_READ | FILE_SHARE_DELETE,
            0,
            _winapi.OPEN_EXISTING,
            FILE_FLAG_OPEN_REPARSE_POINT,
            0,
        )
        return msvcrt.open_osfhandle(handle, os.O_RDONLY | os.O_BINARY | os.O_NOINHERIT)

    def _hold(fd: int) -> None:
        """Nothing more: the handle `_open_held` opened is the hold."""

    def _let_go(fd: int) -> None:
        """Nothing: only closing the handle ends the hold."""

    def _in_use(name: str) -> bool:
        """Open it sharing nothing: Windows refuses while any handle is open."""
        import _winapi

        try:
            handle = _winapi.CreateFile(
                name, _winapi.GENERIC_READ, 0, 0, _winapi.OPEN_EXISTING, 0, 0
            )
        except OSError as exc:
            return getattr(exc, "winerror", 0) == ERROR_SHARING_VIOLATION
        _winapi.CloseHandle(handle)
        return False

    ERROR_SHARING_VIOLATION = 32

else:
    import fcntl

    def _open_held(name: str) -> int:
        return os.open(name, _OPEN_FLAGS)

    def _lock(fd: int, blocking: bool) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _hold(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_SH)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    _let_go = _unlock

    def _in_use(name: str) -> bool:
        """Whether an exclusive lock would have to wait for someone's shared one."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            _lock(fd, blocking=False)
        except (BlockingIOError, PermissionError):
            return True
        finally:
            os.close(fd)
        return False
