"""What every release build script shares (packaging/release/steps.py): how a failed
build step and a failed build read to the person running the build, here and on the
release workflow's runners."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.release_scripts import release_module

pytestmark = pytest.mark.process

steps = release_module("release", "steps")


def test_a_failed_step_shows_the_programs_own_output_even_when_not_utf8() -> None:
    command = [
        sys.executable,
        "-c",
        "import sys; sys.stdout.buffer.write(b'bad \\xff'); sys.exit(3)",
    ]
    with pytest.raises(steps.BuildError) as failed:
        steps.run(command)
    assert "failed (3)" in str(failed.value) and "bad \ufffd" in str(failed.value)
    assert steps.run([sys.executable, "-c", "print('fine')"]) == "fine\n"


def test_a_failed_build_is_one_line_and_exit_status_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[Path, Path]] = []

    def build(out: Path, work: Path) -> Path:
        seen.append((out, work))
        raise steps.BuildError("wixl not found")

    argv = ["--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")]
    assert steps.main(argv, doc="Build it.", build=build, system="windows", work_help="") == 1
    assert capsys.readouterr().err == "build failed: wixl not found\n"
    assert seen == [(tmp_path / "o", tmp_path / "w")]

    def unexpected(out: Path, work: Path) -> Path:
        raise ValueError("a bug")

    with pytest.raises(ValueError):  # not a build failure: a traceback a bug report needs
        steps.main(argv, doc="", build=unexpected, system="linux", work_help="")
