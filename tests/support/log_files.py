"""What a log written by several hosts at once must look like (native_host/logs.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from native_host import logs

WRITER = Path(__file__).resolve().parent / "log_writer.py"
LINE_SLACK = 2 * 4096
"""How far one file may pass the rotation size: two hosts that both checked the size just
before either wrote may each add a line."""


def _available(stream: IO[str] | None) -> str:
    """What a pipe holds now, without waiting for its end: under Wine the wineserver a
    Windows process started may hold the process's pipes open after it exits."""
    if stream is None:
        return ""
    os.set_blocking(stream.fileno(), False)
    try:
        return stream.read() or ""
    except (BlockingIOError, TypeError):
        return ""


class Writers:
    """Log writers (tests/support/log_writer.py) started by `command(tag)`, one per tag."""

    def __init__(
        self, command: Sequence[str], tags: Sequence[str], env: Mapping[str, str] | None = None
    ) -> None:
        self.tags = tuple(tags)
        self.processes = [
            subprocess.Popen(
                [*command, tag],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # a Windows process needs a pipe (or a console) here
                text=True,
                env=env,
            )
            for tag in self.tags
        ]
        for process in self.processes:
            assert self._line(process) == "ready"

    @staticmethod
    def _line(process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line and process.poll() is not None:
            raise AssertionError(f"the writer exited: {_available(process.stderr)}")
        return line

    def _ask(self, process: subprocess.Popen[str], lines: int) -> None:
        assert process.stdin is not None
        process.stdin.write(f"{lines}\n")
        process.stdin.flush()

    def together(self, lines: int) -> None:
        """Every writer writes `lines` lines at the same time."""
        for process in self.processes:
            self._ask(process, lines)
        for process in self.processes:
            assert self._line(process) == "ok"

    def in_turns(self, lines: int, batches: int) -> None:
        """The writers write `batches` batches of `lines` lines each, one after the other,
        every one of them alive (and having written) all along."""
        for _ in range(batches):
            for process in self.processes:
                self._ask(process, lines)
                assert self._line(process) == "ok"

    def finish(self, timeout: float = 120) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.close()
        for process in self.processes:
            assert self._line(process) == "done"
            assert process.wait(timeout=timeout) == 0, _available(process.stderr)

    def kill(self) -> None:
        """End what is still running (a failed test) and close the pipes."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None and not stream.closed:
                    stream.close()


def check_shared_log(directory: Path, tags: tuple[str, ...], count: int) -> list[int]:
    """Assert the log in `directory` after each of `tags` wrote `count` lines: only the log
    and its backups, none much over the rotation size, every line there exactly once, LF
    line ends. Returns the files' sizes, newest first."""
    names = [logs.LOG_FILE, *(f"{logs.LOG_FILE}.{n}" for n in range(1, logs.BACKUPS + 1))]
    present = {path.name for path in directory.iterdir()}
    assert present <= {*names, f"{logs.LOG_FILE}.lock"}, sorted(present)
    sizes = []
    seen: dict[tuple[str, int], int] = {}
    for name in names:
        path = directory / name
        if not path.exists():
            continue
        data = path.read_bytes()
        sizes.append(len(data))
        assert len(data) <= logs.MAX_BYTES + LINE_SLACK, (name, len(data))
        assert b"\r\n" not in data, f"{name} has CRLF line ends"
        for line in data.split(b"\n")[:-1]:
            words = line.split(b" ")
            at = words.index(b"line")
            key = (words[at + 1].decode(), int(words[at + 2]))
            seen[key] = seen.get(key, 0) + 1
    expected = {(tag, number) for tag in tags for number in range(count)}
    assert set(seen) == expected, f"{len(expected - set(seen))} lines lost"
    assert all(times == 1 for times in seen.values()), "a line written twice"
    return sizes
