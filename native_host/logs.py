"""The host's log: a rotating file in the user log dir, never stdout (spec 7.15).

A small writer of its own instead of the `logging` package, which costs a relay start
more than everything else it imports (docs/performance.md). Lines keep the classic
format `2026-12-01 09:30:00,123 <pid> INFO native_host.relay: <text>`, in bytes (no CRLF
on Windows); the file rotates at 1 MiB keeping 3 backups. Several hosts append to one
log: each line is one append, and a rotation is made by one host at a time under the
log's lock file, only if the file is still over the limit once the lock is held, so two
hosts never rotate twice and no line is lost. Windows cannot rename a file another
process holds open unless every holder allowed it: there the log is opened with
FILE_SHARE_DELETE for each line and closed again, so no host pins it, and if some other
program holds it anyway the rotation copies and truncates instead of failing.

At the default level only metadata is logged (ids, types, sizes, codes, timings);
bodies appear only at `trace`, with ticket secrets redacted at every level.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs a relay start milliseconds; annotations only
    import threading
    from collections.abc import Mapping
    from typing import Any

TRACE = 5
DEBUG = 10
INFO = 20
WARNING = 30
ERROR = 40
CRITICAL = 50
LEVELS = {"trace": TRACE, "debug": DEBUG, "info": INFO}
_NAMES = {TRACE: "TRACE", DEBUG: "DEBUG", INFO: "INFO", WARNING: "WARNING", ERROR: "ERROR"}
LOG_FILE = "pedelec-native-host.log"
MAX_BYTES = 1_048_576
BACKUPS = 3
SECRET_FIELDS = frozenset({"token", "uploadUrl", "downloadUrl"})
_TRACE_BODY_CHARS = 2000


class _Sink:
    """The open log file, shared by every `Log` of the process."""

    def __init__(self) -> None:
        self.level = INFO
        self.path: str | None = None
        self.fd: int | None = None
        self.lock = _thread.allocate_lock()

    def write(self, line: str) -> None:
        if self.path is None:
            return
        data = line.encode("utf-8", errors="replace")
        with self.lock:
            try:
                if self.fd is None:
                    self.fd = _open_append(self.path)
                if os.fstat(self.fd).st_size + len(data) > MAX_BYTES:
                    self._rotate(len(data))
                os.write(self.fd, data)
            except OSError:
                pass  # logging failures never affect relaying (spec 7.15)
            finally:
                if not _HOLD_OPEN and self.fd is not None:
                    os.close(self.fd)
                    self.fd = None

    def _rotate(self, adding: int) -> None:
        """Shift `.log` -> `.log.1` -> ... under the log's lock, unless another host
        already did (the file at the path is then a new one, under the limit); then
        reopen the file at the path."""
        assert self.path is not None and self.fd is not None
        from native_host import files

        lock = files.FileLock(f"{self.path}.lock")
        try:
            lock.acquire()
        except OSError:
            pass  # no lock file: rotate unguarded rather than grow
        try:
            if os.stat(self.path).st_size + adding > MAX_BYTES:
                for index in range(BACKUPS - 1, 0, -1):
                    try:
                        os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
                    except OSError:
                        pass
                _move_aside(self.path, f"{self.path}.1")
        except OSError:
            pass
        finally:
            os.close(self.fd)
            self.fd = None
            lock.release()
        self.fd = _open_append(self.path)

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


def _move_aside(path: str, backup: str) -> None:
    """Rename the full log to its first backup; where a holder forbids the rename (a
    program without FILE_SHARE_DELETE on Windows), copy it there and empty it."""
    try:
        os.replace(path, backup)
        return
    except PermissionError:
        pass
    flags = os.O_RDWR | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    source = os.open(path, flags)
    try:
        target = os.open(
            backup, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600
        )
        try:
            while chunk := os.read(source, 65536):
                os.write(target, chunk)
        finally:
            os.close(target)
        os.ftruncate(source, 0)
    finally:
        os.close(source)


if sys.platform == "win32":  # pragma: no cover - Windows only: the Windows lane runs it
    _HOLD_OPEN = False
    """Opened for each line: a host that holds the log would pin its name."""

    def _open_append(path: str) -> int:
        """Append-only (FILE_APPEND_DATA: each write lands at the end, atomically), shared
        for reading, writing and renaming (FILE_SHARE_DELETE), binary, not inherited."""
        import _winapi
        import msvcrt

        access = 0x0004 | 0x0080 | 0x00100000  # APPEND_DATA, READ_ATTRIBUTES, SYNCHRONIZE
        share = 0x1 | 0x2 | 0x4  # FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE
        open_always, normal = 4, 0x80
        handle = _winapi.CreateFile(path, access, share, 0, open_always, normal, 0)
        try:
            fd = msvcrt.open_osfhandle(handle, 0)
        except OSError:
            _winapi.CloseHandle(handle)
            raise
        msvcrt.setmode(fd, os.O_BINARY)
        return fd

else:
    _HOLD_OPEN = True

    def _open_append(path: str) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o600)


_sink = _Sink()


def _timestamp(now: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


class Log:
    """A named logger with the `logging` call style: `log.info("x %s", value)`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def enabled(self, level: int) -> bool:
        return level >= _sink.level and _sink.path is not None

    def _emit(self, level: int, message: str, args: tuple[Any, ...], trace: str = "") -> None:
        if args:
            try:
                message = message % args
            except (TypeError, ValueError):
                message = f"{message} {args!r}"
        name = _NAMES.get(level, "CRITICAL")
        line = f"{_timestamp(time.time())} {os.getpid()} {name} {self.name}: {message}\n"
        _sink.write(line + trace)

    def trace(self, message: str, *args: Any) -> None:
        if self.enabled(TRACE):
            self._emit(TRACE, message, args)

    def debug(self, message: str, *args: Any) -> None:
        if self.enabled(DEBUG):
            self._emit(DEBUG, message, args)

    def info(self, message: str, *args: Any) -> None:
        if self.enabled(INFO):
            self._emit(INFO, message, args)

    def warning(self, message: str, *args: Any) -> None:
        if self.enabled(WARNING):
            self._emit(WARNING, message, args)

    def error(self, message: str, *args: Any) -> None:
        if self.enabled(ERROR):
            self._emit(ERROR, message, args)

    def exception(self, message: str, *args: Any) -> None:
        """`error` plus the traceback of the exception being handled."""
        self.failure(ERROR, message, *args, exc_info=sys.exc_info())

    def failure(self, level: int, message: str, *args: Any, exc_info: tuple[Any, Any, Any]) -> None:
        if self.enabled(level):
            import traceback

            self._emit(level, message, args, "".join(traceback.format_exception(*exc_info)))


def get(name: str) -> Log:
    """The logger of a module: `log = logs.get(__name__)`."""
    return Log(name)


def setup(level_name: str, env: Mapping[str, str] = os.environ) -> str | None:
    """Log to the rotating file in the log dir; returns its path, or None if the dir is
    unusable (the host then runs without a log). The file is opened on the first line."""
    from native_host import files, paths

    _sink.level = LEVELS.get(level_name, INFO)
    try:
        directory = paths.log_dir(env)
        files.ensure_private_dir(directory)
    except (OSError, files.FileRefusedError):
        return None
    _sink.path = os.path.join(directory, LOG_FILE)
    sys.excepthook = _log_uncaught
    hook_threads()
    return _sink.path


def hook_threads() -> None:
    """Log what escapes a `threading.Thread`, once `threading` is loaded: a relay start
    does not load it (its request threads are `_thread` threads, whose failures the relay
    answers and logs itself), so code that starts a `threading.Thread` calls this."""
    if "threading" in sys.modules:
        import threading

        threading.excepthook = _log_thread_exception


def close() -> None:
    """Release the file; nothing more is written (every line was written at once)."""
    _sink.close()
    _sink.path = None


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    get("native_host").failure(CRITICAL, "uncaught exception", exc_info=(kind, value, tb))


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is not None:
        get("native_host").failure(
            ERROR,
            "uncaught exception in thread %s",
            args.thread.name if args.thread else "?",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )


def redact(value: Any) -> Any:
    """A copy of a JSON value with ticket secrets replaced, for trace logging."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if k in SECRET_FIELDS else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def trace_body(log: Log, label: str, body: Any) -> None:
    """Log a message body at trace level only: redacted and truncated."""
    if log.enabled(TRACE):
        from native_host import codec

        text = codec.encode(redact(body)).decode("utf-8", errors="replace")[:_TRACE_BODY_CHARS]
        log.trace("%s %s", label, text)
