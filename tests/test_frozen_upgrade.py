"""The release tarball's documented upgrade under hosts that are serving (issue 30):
the newer tarball extracted where the older one was, then the newer version's own
`install` (docs/install.md, "Release artifacts").

The two tarballs are the ones `.ci/run` builds: this tree's (packaging/linux/build.py)
and the newer, internally different one (`python3 -m tests.support.variant tarball`),
named by PEDELEC_RELEASE_TARBALLS ("<older> <newer>"); the test runs in that step only
(marker `release_lane`) and skips elsewhere, saying how to run it. Three hosts started
from the older version's registration (mid-stream, a request in flight, idle:
tests/support/live_hosts.py) answer every request type through the upgrade and a Core
restart that starts the Desktop; the next host runs the newer version from its start
image; `doctor` names both while the old hosts run; and once the last of them exits,
the older version's folder is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from native_host import HOST_NAME, __version__, startimage
from tests.support.live_hosts import ThreeLiveHosts
from tests.support.markers import needs_os
from tests.support.variant import newer_version

pytestmark = [
    pytest.mark.process,
    pytest.mark.release_lane,
    needs_os("linux", reason="the Linux release tarball"),
]

TARBALLS_ENV = "PEDELEC_RELEASE_TARBALLS"
RUN_IT = (
    f"{TARBALLS_ENV}='<older> <newer>' python -m pytest -m release_lane (the tarballs of "
    "packaging/linux/build.py and `python3 -m tests.support.variant tarball`; .ci/run)"
)


@pytest.fixture
def tarballs() -> tuple[Path, Path]:
    named = os.environ.get(TARBALLS_ENV, "").split()
    if not named:
        pytest.skip(f"the release tarballs' upgrade runs in its own .ci/run step: {RUN_IT}")
    older, newer = (Path(name) for name in named)
    assert older.is_file() and newer.is_file(), named
    return older, newer


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done


def registered(env: dict[str, str]) -> Callable[[], list[str]]:
    manifest = Path(env["XDG_CONFIG_HOME"], "chromium", "NativeMessagingHosts", f"{HOST_NAME}.json")
    return lambda: [json.loads(manifest.read_text())["path"]]


def test_the_documented_upgrade_under_live_hosts(
    tarballs: tuple[Path, Path], env: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    share = Path(env["HOME"], ".local", "share")
    share.mkdir(parents=True)
    Path(env["XDG_CONFIG_HOME"], "chromium").mkdir(parents=True)  # a user with Chromium
    root = share / "pedelec-native-host"
    old, new = __version__, newer_version()
    run(["tar", "-xzf", str(tarballs[0]), "-C", str(share)], env)
    run([str(root / old / "pedelec-native-host"), "install", "--browser", "chromium"], env)
    live = ThreeLiveHosts(tmp_path / "world", registered(env), env)
    try:
        live.start()
        assert set(live.starts().values()) == {(old, startimage.LOADED)}
        # The upgrade, as docs/install.md says: the same two commands, the newer tarball.
        run(["tar", "-xzf", str(tarballs[1]), "-C", str(share)], env)
        installed = run(
            [str(root / new / "pedelec-native-host"), "install", "--browser", "chromium"], env
        )
        assert (
            f"kept            {root / old} (hosts of version {old} run from it" in installed.stdout
        )
        live.after_upgrade()
        live.core_restart()
        assert live.versions() == {old}
        assert live.next_start() == (new, startimage.LOADED)
        doctor = run([str(root / new / "pedelec-native-host"), "doctor", "--json",
                      "--browser", "chromium"], env)  # fmt: skip
        findings = json.loads(doctor.stdout)["findings"]
        found = {(f["check"], f["status"]) for f in findings}
        assert {("host version", "ok"), ("older hosts running", "warn")} <= found
    finally:
        live.close()
    # The last old host removed its folder as it exited.
    assert sorted(p.name for p in root.iterdir()) == [new, "current"]
    assert (root / "current").read_text() == f"{new}\n"
