"""Throwaway local users, so a test can play "another local user" for real.

CI runs as root, so tests create users with unique names (`useradd`), run programs as
them, and always remove them afterwards, with every process they still run, even when
the test fails. A user that cannot be created fails the test: these tests never skip
(a security test that silently skips in CI is a defect).

Programs run as the user through `subprocess`'s own `user=`, `group=` and
`extra_groups=[]`: the child drops to the user's uid, primary group and no supplementary
group right before `exec`, with no PAM stack, no login session and no helper binary in
between (measured against `setpriv` and `runuser`, see docs/security.md). The project's
interpreter lives under `/root` (mode 0700), so users run Debian's `/usr/bin/python3`:
standard library only, which is all a squatter or a planted program needs.

    with throwaway_users() as make_user:
        mallory = make_user()
        squatter = mallory.spawn_python(SQUATTER_CODE, str(port))
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

if os.name == "posix":  # throwaway users exist on Linux only; the module imports anywhere
    import pwd

SYSTEM_PYTHON = "/usr/bin/python3"
"""An interpreter every user can run (the project's pyenv one is under /root, 0700)."""

_LEFT_OUT_OF_A_COPY = ("site-packages", "config-*", "idlelib", "tkinter", "turtledemo",
                       "ensurepip", "test", "__pycache__", "*.a")  # fmt: skip


def python_for_everyone(root: Path) -> tuple[str, dict[str, str]]:
    """An interpreter of this very version every user can run, and the environment it
    needs: Debian's when it is this version, else this one's installation copied into
    `root` (without its site-packages: a test gives the packages it needs), for the
    compiled extensions (pydantic-core) copied from this environment to load."""
    import shutil
    import sysconfig

    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.stdout.strip() == version:
        return SYSTEM_PYTHON, {}
    base = Path(sys.base_prefix)
    binary = root / "bin" / f"python{version}"
    binary.parent.mkdir(parents=True)
    shutil.copy2(base / "bin" / f"python{version}", binary)
    library = root / "lib"
    library.mkdir()
    for shared in base.joinpath("lib").glob(f"libpython{version}*.so*"):
        shutil.copy2(shared, library / shared.name, follow_symlinks=True)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    ignore = shutil.ignore_patterns(*_LEFT_OUT_OF_A_COPY)
    shutil.copytree(stdlib, library / stdlib.name, ignore=ignore, symlinks=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path == binary else 0o644)
    return str(binary), {"LD_LIBRARY_PATH": str(library)}


NAME_PREFIX = "pdlt"
"""Every throwaway user's name starts with this, then the creating pid, `x`, random hex."""

_LOCK_RETRIES = 40
"""useradd/userdel fail while another process holds /etc/passwd's lock: retry a while."""


class UserSetupError(RuntimeError):
    """A throwaway user could not be created or removed: the test must fail, not skip."""


def _admin_tool(name: str) -> str:
    """useradd and userdel live in sbin, which a plain user's PATH (and the README's
    `PATH=/usr/local/bin:/usr/bin:/bin`) leaves out."""
    for directory in ("/usr/sbin", "/sbin", *os.environ.get("PATH", "").split(os.pathsep)):
        candidate = os.path.join(directory, name)
        if directory and os.access(candidate, os.X_OK):
            return candidate
    return name


def _admin(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run useradd/userdel, retrying while another process holds the passwd lock."""
    argv = [_admin_tool(argv[0]), *argv[1:]]
    for _attempt in range(_LOCK_RETRIES):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except FileNotFoundError as exc:
            raise UserSetupError(f"{argv[0]} is not installed: {exc}") from None
        # 1: cannot update the password file; 10: cannot lock it (shadow-utils codes).
        if done.returncode not in (1, 10) or "lock" not in done.stderr.lower():
            return done
        time.sleep(0.05 + secrets.randbelow(100) / 1000)
    return done


def processes_of(uid: int) -> list[int]:
    """Live pids whose real or effective uid is `uid` (found through /proc). Zombies run
    nothing and cannot be killed: they are left to whoever reaps them."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            lines = Path(f"/proc/{entry}/status").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        real, effective = (int(i) for i in fields.get("Uid", "-1 -1").split()[:2])
        if uid in (real, effective) and not fields.get("State", "").strip().startswith("Z"):
            pids.append(int(entry))
    return pids


def kill_processes_of(uid: int, deadline_s: float = 10.0) -> None:
    """SIGKILL, by pid, every process running as `uid` until none is left (they may
    fork while we look). Only ever called for a throwaway user's uid."""
    if uid == 0:
        raise ValueError("refusing to kill root's processes")
    end = time.monotonic() + deadline_s
    while pids := processes_of(uid):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > end:
            raise UserSetupError(f"processes of uid {uid} survive SIGKILL: {pids}")
        time.sleep(0.01)


class LocalUser:
    """One throwaway user: its name, ids, and a private working directory it owns."""

    def __init__(self, name: str, uid: int, gid: int, workdir: Path) -> None:
        self.name = name
        self.uid = uid
        self.gid = gid
        self.workdir = workdir

    def __repr__(self) -> str:
        return f"LocalUser({self.name!r}, uid={self.uid})"

    def env(self, **extra: str) -> dict[str, str]:
        """A minimal environment: nothing of root's leaks into the user's programs."""
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.workdir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            **extra,
        }

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[str]:
        """Start `argv` as this user (uid, primary group, no supplementary groups)."""
        kwargs.setdefault("env", self.env())
        kwargs.setdefault("cwd", self.workdir)
        kwargs.setdefault("text", True)
        return subprocess.Popen(
            list(argv), user=self.uid, group=self.gid, extra_groups=[], **kwargs
        )

    def run(
        self, argv: Sequence[str], timeout: float = 30, check: bool = True, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` as this user to completion and capture its output."""
        kwargs.setdefault("env", self.env())
        kwargs.setdefault("cwd", self.workdir)
        return subprocess.run(
            list(argv),
            user=self.uid,
            group=self.gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            **kwargs,
        )

    def python(
        self, code: str, *args: str, timeout: float = 30, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a Python snippet as this user with Debian's interpreter (`-I`: isolated)."""
        return self.run([SYSTEM_PYTHON, "-I", "-c", code, *args], timeout=timeout, check=check)

    def spawn_python(self, code: str, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
        """Start a Python snippet as this user; stdout is a pipe unless told otherwise."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        return self.popen([SYSTEM_PYTHON, "-I", "-c", code, *args], **kwargs)


def skip_unless_root() -> None:
    """Outside CI a non-root run (a newcomer's README command) skips these tests, saying
    why; in CI (CI=true, which runs as root) they run, and without root they fail."""
    if os.geteuid() == 0 or os.environ.get("CI"):
        return
    import pytest

    pytest.skip("needs root to create throwaway local users (CI runs these as root)")


def _new_name() -> str:
    return f"{NAME_PREFIX}{os.getpid()}x{secrets.token_hex(3)}"


def _create(name: str) -> LocalUser:
    if os.geteuid() != 0:
        raise UserSetupError(
            "creating throwaway users needs root (CI runs as root); these tests never skip"
        )
    done = _admin(
        [
            "useradd",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--user-group",
            "--comment",
            "pedelec-native-host test user",
            name,
        ]
    )
    if done.returncode != 0:
        raise UserSetupError(f"useradd {name} failed ({done.returncode}): {done.stderr.strip()}")
    entry = pwd.getpwnam(name)
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    os.chown(workdir, entry.pw_uid, entry.pw_gid)
    workdir.chmod(0o700)
    return LocalUser(name, entry.pw_uid, entry.pw_gid, workdir)


def remove_user(name: str) -> None:
    """Kill the user's processes, then delete it (and its private group)."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    kill_processes_of(uid)
    done = _admin(["userdel", name])
    if done.returncode != 0:  # e.g. a process appeared between the kill and userdel
        kill_processes_of(uid)
        done = _admin(["userdel", "--force", name])
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        raise UserSetupError(f"userdel {name} failed ({done.returncode}): {done.stderr.strip()}")


def sweep_stale_users() -> None:
    """Remove throwaway users left by a test run that was killed before its cleanup (its
    creating pid, which is in the name, is gone). Users of live runs are left alone."""
    for entry in pwd.getpwall():
        rest = entry.pw_name.removeprefix(NAME_PREFIX)
        pid, sep, _ = rest.partition("x")
        if rest == entry.pw_name or not sep or not pid.isdigit() or int(pid) == os.getpid():
            continue
        if not Path(f"/proc/{pid}").exists():
            remove_user(entry.pw_name)


@contextlib.contextmanager
def throwaway_users() -> Iterator[Callable[[], LocalUser]]:
    """Yield a factory of throwaway users; on exit, whatever happened, every user made
    is removed with its processes and working directory."""
    sweep_stale_users()
    made: list[LocalUser] = []

    def make_user() -> LocalUser:
        user = _create(_new_name())
        made.append(user)
        return user

    try:
        yield make_user
    finally:
        problems = []
        for user in made:
            try:
                remove_user(user.name)
            except UserSetupError as exc:
                problems.append(str(exc))
            shutil.rmtree(user.workdir, ignore_errors=True)
        if problems:
            raise UserSetupError("; ".join(problems))
