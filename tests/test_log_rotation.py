"""The log shared by several hosts (native_host/logs.py): two host processes writing past
the rotation size at once lose no line, write none twice, and leave the log and its
backups each about the rotation size. The same check runs on the Windows lane
(tests/windows/test_log_rotation.py), where renaming a file another process holds open
is a sharing violation.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from native_host import logs
from tests.support.log_files import WRITER, Writers, check_shared_log

pytestmark = pytest.mark.process

COUNT = 6000
"""Lines per host: two hosts write about 2.6 MB, past two rotations, within the log and
its three backups (so no line is rotated away)."""


def test_two_hosts_writing_past_the_rotation_size(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    writers = Writers([sys.executable, "-I", str(WRITER), str(directory)], ("a", "b"))
    try:
        writers.together(COUNT)
        writers.finish()
    finally:
        writers.kill()
    sizes = check_shared_log(directory, writers.tags, COUNT)
    assert len(sizes) >= 3, sizes  # it rotated at least twice
    assert sum(sizes) > 2 * logs.MAX_BYTES
