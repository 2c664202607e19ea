"""On the Windows lane: two hosts (Windows processes) write one log past its rotation size
(native_host/logs.py). Renaming a file another process holds open is a sharing violation on
Windows, so a host that kept the log open stopped every rotation and the log grew without
bound; now it rotates, every line is there once, and lines end in LF. A program that
holds the log without FILE_SHARE_DELETE (Python's own `open`, an editor) makes the rename
fail even so: the rotation then copies the log aside and empties it.

The hosts write in turns, both alive and both having written all along: Wine 8 does not
make an append-only write atomic across processes (two hosts appending at the same
instant under Wine lost 12 lines of 12,000), which Windows does; on Linux the same hosts
write at once (tests/test_log_rotation.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from native_host import logs
from tests.support.log_files import WRITER, Writers, check_shared_log
from tests.support.wine import python_command, windows_path, wine_environment

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

BATCH, BATCHES = 500, 12
"""Each host writes 12 batches of 500 lines, about 1.3 MB: two pass two rotations."""


@pytest.mark.timeout(600)
def test_two_hosts_writing_past_the_rotation_size(lane: None, tmp_path: Path) -> None:
    directory = tmp_path / "log"
    command = [*python_command(), windows_path(WRITER), windows_path(directory)]
    writers = Writers(command, ("a", "b"), env=wine_environment())
    try:
        writers.in_turns(BATCH, BATCHES)
        writers.finish()
    finally:
        writers.kill()
    sizes = check_shared_log(directory, writers.tags, BATCH * BATCHES)
    assert len(sizes) >= 3, sizes  # it rotated at least twice
    assert sum(sizes) > 2 * logs.MAX_BYTES


HOLDER = r"""
import sys
held = open(sys.argv[1], "rb")  # no FILE_SHARE_DELETE: the log cannot be renamed
print("held", flush=True)
sys.stdin.read()
"""


LONG_LINE, LONG_LINES = 2000, 120
"""Lines of about 2 KB, written 120 at a time: fewer Wine round trips for the same bytes."""


@pytest.mark.timeout(600)
def test_a_program_holding_the_log_does_not_stop_its_rotation(lane: None, tmp_path: Path) -> None:
    directory = tmp_path / "log"
    command = [*python_command(), windows_path(WRITER), windows_path(directory), str(LONG_LINE)]
    writers = Writers(command, ("a",), env=wine_environment())
    holder = None
    try:
        writers.in_turns(LONG_LINES, 1)  # the log exists
        holder = subprocess.Popen(
            [*python_command(), "-c", HOLDER, windows_path(directory / logs.LOG_FILE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=wine_environment(),
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        writers.in_turns(LONG_LINES, 9)  # 10 x 120 x 2 KB: past two rotations
        writers.finish()
        assert holder.stdin is not None
        holder.stdin.close()  # the holder reads to EOF, then lets go
        assert holder.wait(timeout=60) == 0
    finally:
        writers.kill()
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
    sizes = check_shared_log(directory, writers.tags, 10 * LONG_LINES)
    assert len(sizes) >= 3, sizes
