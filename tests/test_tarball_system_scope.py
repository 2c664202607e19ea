"""The Linux release tarball installed for every user of the machine, as an administrator
does it (docs/install.md, "For administrators"): extracted by root into an /opt-like
folder, registered by its own `install --scope system` in the browsers' system folders
(/etc/opt/chrome/native-messaging-hosts, /etc/chromium/native-messaging-hosts, ...),
used by another local user whose Chrome has user-level hosts turned off by policy, and
removed by its own `uninstall`, leaving /etc as it found it. Extracted where anyone else
could change it, it refuses to register.

It writes the real system folders, so it runs in .ci/run's tarball step, where nothing
else runs beside it, and in the release workflow's Linux job (root in both):

    PEDELEC_TEST_TARBALL=dist/linux/<tarball> python3 -m pytest -m release_tarball \\
        tests/test_tarball_system_scope.py

Elsewhere it skips, saying so; every path it touches in /etc is compared before and
after, and whatever it made is removed even when it fails.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from native_host import HOST_NAME
from native_host.install.locations import Sandbox, rows_for
from native_host.install.managed_policy import USER_LEVEL
from tests.support.markers import needs_os
from tests.support.users import LocalUser, throwaway_users

pytestmark = [
    pytest.mark.process,
    pytest.mark.release_tarball,
    needs_os("linux", reason="installs the Linux tarball into /etc's browser folders"),
]

TARBALL_ENV = "PEDELEC_TEST_TARBALL"
RUN_IT = (
    f"{TARBALL_ENV}=dist/linux/<tarball> python3 -m pytest -m release_tarball "
    "tests/test_tarball_system_scope.py (.ci/run's tarball step, as root)"
)
WATCHED = (Path("/etc/opt"), Path("/etc/chromium"), Path("/etc/vivaldi"))
"""Where the Linux rows' system folders and Chrome's managed policies live."""
POLICY = Path("/etc/opt/chrome/policies/managed")
MANIFEST = f"{HOST_NAME}.json"
BUNDLE = "pedelec-native-host"


def system_folders() -> list[Path]:
    """Every system folder `install --scope system --browser all` registers in."""
    rows = [row for row in rows_for("linux") if row.sandbox is Sandbox.NONE]
    return sorted({Path(folder) for row in rows for folder in row.system_dirs})


def etc_state() -> dict[str, tuple[int, int, str]]:
    """Every path under WATCHED (themselves included) with its mode, owner and content
    hash (nothing else of /etc: adding the throwaway user changes /etc/passwd)."""
    state = {}
    for root in WATCHED:
        for path in [root, *root.rglob("*")] if root.exists() else []:
            info = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
            state[str(path)] = (stat.S_IMODE(info.st_mode), info.st_uid, digest)
    return state


@pytest.fixture(scope="module")
def tarball() -> Path:
    value = os.environ.get(TARBALL_ENV)
    if not value:
        pytest.skip(f"the tarball's system-scope install runs in its own step: {RUN_IT}")
    if os.geteuid() != 0:
        pytest.fail(f"it writes /etc's browser folders: run it as root ({RUN_IT})")
    path = Path(value).resolve()
    if not path.is_file():
        pytest.fail(f"{TARBALL_ENV}={value} is not a file: {RUN_IT}", pytrace=False)
    return path


ETC_LOCK = Path("/run/lock/pedelec-native-host-etc-test.lock")
"""Held while a test writes /etc: two runs of this module on one machine (two checkouts)
take turns, or each would see the other's files as its own leftovers."""


@pytest.fixture
def etc_untouched() -> Iterator[None]:
    """/etc after the test as it was before it; whatever is new there is removed even
    when the test failed (and the check then fails, naming it)."""
    ETC_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with ETC_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _etc_compared()


def _etc_compared() -> Iterator[None]:
    before = etc_state()
    try:
        yield
    finally:
        after = etc_state()
        for name in sorted(set(after) - set(before), key=len, reverse=True):
            path = Path(name)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"the test left /etc changed: {changed}"


@pytest.fixture
def opt() -> Iterator[Path]:
    """An /opt-like folder: root's, 0755, in a place every user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="pedelec-opt-", dir="/var/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def extract(tarball: Path, into: Path) -> Path:
    """`tar -xzf <tarball> -C <into>`, as docs/install.md says; the bundle's executable, in
    its version's folder."""
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(into)], check=True, timeout=300)
    (version,) = (into / BUNDLE).iterdir()
    return version / BUNDLE


def root_env(tmp_path: Path) -> dict[str, str]:
    """Root's own folders for install's record and config, in temporary space."""
    home = tmp_path / "root-home"
    home.mkdir(mode=0o700)
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PEDELEC_NATIVE_HOST_STATE_DIR": str(home / "state"),
        "PEDELEC_NATIVE_HOST_CONFIG_DIR": str(home / "config"),
        "PEDELEC_NATIVE_HOST_LOG_DIR": str(home / "logs"),
    }


def run(host: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(host), *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def doctor_as(user: LocalUser, host: Path, *browsers: str) -> dict[tuple[str, str], dict[str, str]]:
    done = user.run(
        [str(host), "doctor", "--json", "--browser", *browsers], timeout=300, check=False
    )
    assert done.returncode in (0, 1), done.stderr  # 1: no Core runs here
    return {(f["subject"], f["check"]): f for f in json.loads(done.stdout)["findings"]}


@pytest.mark.usefixtures("etc_untouched")
def test_registered_for_every_user_used_by_another_under_policy_and_removed(
    tarball: Path, opt: Path, tmp_path: Path
) -> None:
    host = extract(tarball, opt)
    env = root_env(tmp_path)
    done = run(host, env, "install", "--scope", "system", "--browser", "all")
    assert done.returncode == 0, done.stderr
    for folder in system_folders():
        manifest = folder / MANIFEST
        assert f"{'wrote':<15} manifest {manifest} (" in done.stdout
        info = manifest.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o644, 0), manifest
        assert json.loads(manifest.read_text())["path"] == str(host)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755

    made = [p for p in (POLICY.parent, POLICY) if not p.exists()]
    POLICY.mkdir(parents=True, exist_ok=True)
    (POLICY / "pedelec-test.json").write_text(json.dumps({USER_LEVEL: False}))
    try:
        with throwaway_users() as make_user:
            found = doctor_as(make_user(), host, "chrome", "chromium")
    finally:
        (POLICY / "pedelec-test.json").unlink()
        for folder in reversed(made):
            folder.rmdir()
    policy = found[("chrome", "managed policy")]
    assert policy["status"] == "ok" and f"{USER_LEVEL} is false" in policy["detail"], policy
    for browser, folder in (("chrome", "/etc/opt/chrome"), ("chromium", "/etc/chromium")):
        present = found[(browser, "manifest present")]
        assert present["status"] == "ok", present
        assert present["detail"].startswith(f"{folder}/native-messaging-hosts/{MANIFEST}")
        assert f"system level: the one {browser} loads" in present["detail"]
        registered = found[(browser, "host registered")]
        assert registered["detail"] == f"this host ({host}, which runs this doctor)"
        # Started as the other user's Chrome starts it: it answers (the Core is down).
        assert found[(browser, "host answers ping")]["status"] == "ok"

    done = run(host, env, "uninstall")
    assert done.returncode == 0, done.stderr
    assert not any((folder / MANIFEST).exists() for folder in system_folders())


@pytest.mark.usefixtures("etc_untouched")
@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("world-writable folder", "(a directory on the way) is writable by other users"),
        ("a user's own folder", "belongs to another user"),
    ],
)
def test_extracted_where_others_can_change_it_it_refuses_to_register(
    tarball: Path, opt: Path, tmp_path: Path, how: str, said: str
) -> None:
    """A folder anyone can write (an /opt made 0777), or a bundle a user extracted and
    owns: whoever can change it would run code as every user whose browser starts it."""
    host = extract(tarball, opt)
    if how == "world-writable folder":
        opt.chmod(0o777)
    else:
        for path in [host.parent, *host.parent.rglob("*")]:
            os.lchown(path, 65534, 65534)
    env = root_env(tmp_path)
    done = run(host, env, "install", "--scope", "system", "--browser", "all")
    assert done.returncode == 1, done.stdout
    (line,) = done.stderr.splitlines()
    assert f"refusing to register this executable ({host}) for every user of this machine: " in line
    assert said in line
    assert not (Path(env["PEDELEC_NATIVE_HOST_STATE_DIR"]) / "install-record.json").exists()
