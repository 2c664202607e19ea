"""The host checks where it lives (native_host/install/host_location.py): the rule it
applies to the Desktop's program applies to itself. A host in a folder another local user
can write is one they can swap: `install` refuses to register it, saying which folder and
the fix, and `doctor` reports a registration naming it as a failure. Played with a real
throwaway user who does swap it, as docs/security.md's probes are; and installers/install.sh
refuses such a prefix and makes its own private."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.users import skip_unless_root, throwaway_users
from tests.test_doctor import finding, run, write_host, write_manifest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every user may write (mode 0777, not sticky) in /tmp, which others can
    reach: what a tarball extracted into a shared place gives."""
    folder = Path(tempfile.mkdtemp(prefix="pdl-shared-", dir="/tmp"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def install(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "native_host", "install", "--force", *args],
        env=env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip


def test_install_refuses_and_doctor_fails_a_host_another_user_can_swap(
    tmp_path: Path, env: dict[str, str], shared_folder: Path
) -> None:
    skip_unless_root()
    host = write_host(shared_folder / "pedelec-native-host", "pass\n")
    profile = tmp_path / "profile"
    refused = install(env, "--user-data-dir", str(profile), "--host-path", str(host))
    assert refused.returncode != 0
    assert f"{shared_folder} (a directory on the way) is writable by other users" in refused.stderr
    assert "chmod go-w" in refused.stderr and "Traceback" not in refused.stderr
    assert not (profile / "NativeMessagingHosts").exists(), "nothing was registered"

    # The hole is real: another user replaces the executable the manifest would name.
    marker = shared_folder / "ran-as-victim"
    with throwaway_users() as make_user:
        mallory = make_user()
        mallory.run([
            "sh", "-c",
            f"printf '#!/bin/sh\\ntouch {marker}\\n' > {shared_folder}/planted && "
            f"chmod 755 {shared_folder}/planted && mv -f {shared_folder}/planted {host}",
        ])  # fmt: skip
        assert host.stat().st_uid == mallory.uid

        # A registration naming it (an older install, or a folder opened up later).
        write_manifest(profile, path=str(host))
        code, findings, _ = run(env, "--user-data-dir", str(profile))
    assert code == 1
    judged = finding(findings, "path only yours")
    assert judged["status"] == "fail"
    assert (
        f"{shared_folder} (a directory on the way) is writable by other users" in judged["detail"]
    )
    assert "chmod go-w" in judged["hint"]
    assert not marker.exists(), "doctor never started the swapped host"


def test_doctor_passes_a_host_only_its_user_can_change(tmp_path: Path, env: dict[str, str]) -> None:
    host = write_host(tmp_path / "private" / "pedelec-native-host", "pass\n")
    profile = tmp_path / "profile"
    write_manifest(profile, path=str(host))
    _, findings, _ = run(env, "--user-data-dir", str(profile))
    assert finding(findings, "path only yours")["status"] == "ok"


def test_install_sh_refuses_a_prefix_others_can_write(tmp_path: Path, env: dict[str, str]) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    prefix.chmod(0o777)
    done = subprocess.run(
        ["sh", str(REPO / "installers" / "install.sh"), "--prefix", str(prefix)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"{prefix} is writable by other users" in done.stderr
    assert f"chmod go-w '{prefix}'" in done.stderr
    assert stat.S_IMODE(prefix.stat().st_mode) == 0o777 and not os.listdir(prefix)
