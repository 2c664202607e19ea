"""On the Windows lane: two hosts (Windows processes) write one log past its rotation size
(native_host/logs.py). Renaming a file another process holds open is a sharing violation on
Windows, so a host that kept the log open stopped every rotation and the log grew without
bound; now it rotates, every line is there once, and lines end in LF.

The hosts write in turns, both alive and both having written all along: Wine 8 does not
make an append-only write atomic across processes (two hosts appending at the same
instant under Wine lost 12 lines of 12,000), which Windows does; on Linux the same hosts
write at once (tests/test_log_rotation.py).
"""

from __future__ import annotations

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
