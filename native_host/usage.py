"""What every command a person runs shares: a usage error is one line on stderr and exit
status 2 (never a traceback), option values are checked for range before anything runs,
and Ctrl-C ends a command without a traceback, after its own cleanup (`native_host.cli`
then exits 130).

The relay never imports this: it is for the commands (`native_host.cli` dispatches them).
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import math
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import NoReturn

EXIT_USAGE = 2
"""argparse's status for a usage error; every usage error of every command uses it."""
MAX_PORT = 65_535


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line: what is wrong, and where the
    options are listed (argparse prints its whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(EXIT_USAGE, f"{self.prog}: error: {text} (see `{self.prog} --help`)\n")


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    value = _integer(text, "a port")
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: 0 (any free port) to 65535")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds (at most a day)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds greater than 0 and at most 86400"
        )
    return value


def existing_parent(text: str) -> Path:
    """A path whose parent folder exists: the command creates at most the last part, never
    folders above it that it was not asked for."""
    path = Path(text)
    parent = path.absolute().parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r}: the folder {str(parent)!r} does not exist; create it first"
        )
    return path


def _integer(text: str, what: str) -> int:
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    if not digits.isascii() or not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a whole number)")
    return int(stripped)


# --- Ctrl-C -------------------------------------------------------------------------
RETRY_S = 0.01
"""How soon an interrupt put off (see `_on_interrupt`) is delivered again."""
_OWN_CODE = os.path.dirname(os.path.abspath(__file__))
_WAITS = frozenset({
    ("threading.py", "wait"), ("threading.py", "_wait_for_tstate_lock"),
    ("queue.py", "get"), ("queue.py", "put"),
    ("subprocess.py", "wait"), ("subprocess.py", "_wait"), ("subprocess.py", "_try_wait"),
    ("subprocess.py", "communicate"), ("subprocess.py", "_communicate"),
    ("selectors.py", "select"),
})  # fmt: skip
"""The standard library's waits, made to be interrupted (on a lock, a queue, a child
process, a selector): where a command's main thread spends its waiting."""
_held = 0
_pending = False


def _can_raise(frame: FrameType | None) -> bool:
    """Whether KeyboardInterrupt may be raised in `frame`: the command's own code or a
    standard wait, and not inside an import or a `__del__` (there it would be swallowed,
    or abort an extension module initialising: pydantic-core's does). Anywhere else the
    standard library or a dependency may be half-way through something it does not undo
    on an exception (tempfile's probe file, a temporary folder being created)."""
    if frame is None:
        return False
    innermost = frame.f_code
    waiting = (os.path.basename(innermost.co_filename), innermost.co_name) in _WAITS
    if not (waiting or innermost.co_filename.startswith(_OWN_CODE)):
        return False
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") or code.co_name == "__del__":
            return False
        frame = frame.f_back
    return True


def _deliver_again(signum: int) -> None:
    """The interrupt once more, to the main thread, so a wait it is blocked in wakes."""
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(threading.main_thread().ident or 0, signum)
    else:  # Windows: no signals between threads; Python's own simulated one
        _thread.interrupt_main(signal.Signals(signum))


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    """The first Ctrl-C raises KeyboardInterrupt where that is safe (`_can_raise`), and
    any later one is ignored, so the cleanup it starts runs to its end. Inside a held
    section it is raised when the section ends; anywhere else unsafe it is delivered
    again a moment later, until it lands where it can be raised."""
    global _pending
    if _held:
        _pending = True
        return
    if not _can_raise(frame):
        retry = threading.Timer(RETRY_S, _deliver_again, (signum,))
        retry.daemon = True
        retry.start()
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def stop_on_interrupt() -> None:
    """Install the command's Ctrl-C handling (`_on_interrupt`); main thread only."""
    signal.signal(signal.SIGINT, _on_interrupt)


def ignore_interrupts() -> None:
    """Once the command is over: the process is only ending, and an interrupt raised in
    the interpreter's own shutdown would be reported as an error that was ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C while a child process is started and its cleanup registered, so no
    interrupt lands between the two; it is raised when the section ends. Elsewhere than
    the main thread (where signal handlers run) this holds nothing."""
    global _held, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held and _pending:
            _pending = False
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            raise KeyboardInterrupt
