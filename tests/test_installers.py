"""`installers/install.sh` from a fresh checkout: builds from the current files, records
its prefix, undoes everything on `--uninstall`, and leaves nothing after a failure.

Linux only runs here (macOS runs the same script; Windows users install the MSI).
Each install builds a real virtualenv with dependencies from PyPI: marked `packaging`.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from native_host import HOST_NAME
from tests.support.checkout import fresh_checkout

pytestmark = [pytest.mark.process, pytest.mark.packaging, pytest.mark.timeout(600)]


def snapshot(*roots: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under the roots with its mode and content (None for directories)."""
    result: dict[str, tuple[int, bytes | None]] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            info = path.lstat()
            content = None if path.is_dir() else path.read_bytes()
            result[str(path)] = (stat.S_IMODE(info.st_mode), content)
    return result


def watched_dirs(env: dict[str, str], tmp_path: Path) -> tuple[Path, ...]:
    """Where install.sh and `install` may write: the browsers' dirs and XDG dirs in the
    home, the host's config and the Pedelec home (the state dir is checked apart)."""
    home = Path(env["HOME"])
    return (home / ".config", home / ".local", tmp_path / "config", tmp_path / "pedelec-home")


class Installer:
    """install.sh of one fresh checkout, run as a user with Chromium in an isolated home."""

    def __init__(self, checkout: Path, env: dict[str, str], home: Path) -> None:
        self.script = checkout / "installers" / "install.sh"
        self.env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env["PYTHON"] = sys.executable
        self.home = home
        hosts_dir = Path(env["XDG_CONFIG_HOME"], "chromium", "NativeMessagingHosts")
        hosts_dir.parent.mkdir(parents=True)  # a user who has Chromium
        self.manifest = hosts_dir / f"{HOST_NAME}.json"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", str(self.script), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
            env=self.env,
            check=False,
        )


@pytest.fixture
def installer(tmp_path: Path, env: dict[str, str], permanent_dir: Path) -> Installer:
    checkout = fresh_checkout(tmp_path / "checkout")
    (tmp_path / "tmpdir").mkdir()
    return Installer(checkout, {**env, "TMPDIR": str(tmp_path / "tmpdir")}, permanent_dir)


def test_install_sh_builds_the_current_source_and_uninstall_leaves_nothing(
    installer: Installer, tmp_path: Path, env: dict[str, str]
) -> None:
    checkout = installer.script.parent.parent
    # An old onedir build and an old setuptools build dir lying in the checkout.
    stale = checkout / "dist" / "pedelec-native-host" / "pedelec-native-host"
    stale.parent.mkdir(parents=True)
    ran_stale = tmp_path / "stale-bundle-ran"
    stale.write_text(f"#!/bin/sh\ntouch {ran_stale}\n")
    stale.chmod(0o755)
    old_module = checkout / "build" / "lib" / "native_host" / "removed_long_ago.py"
    old_module.parent.mkdir(parents=True)
    old_module.write_text("")
    watched = watched_dirs(env, tmp_path)
    before = snapshot(*watched)
    prefix = installer.home / "prefix"

    done = installer.run("--prefix", str(prefix))
    assert done.returncode == 0, done.stdout + done.stderr
    host = prefix / "venv" / "bin" / "pedelec-native-host"
    assert f"next: check that each browser can start the host: {host} doctor\n" in done.stdout
    manifest = json.loads(installer.manifest.read_text())
    launcher = Path(manifest["path"]).read_text()
    assert str(prefix / "venv" / "bin" / "python") in launcher
    assert not ran_stale.exists()
    assert list(prefix.rglob("removed_long_ago.py")) == []
    version = subprocess.run([host, "-V"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("pedelec-native-host ")

    # A re-install that fails (an unknown browser) keeps the working install as it was.
    registered = installer.manifest.read_bytes()
    failed = installer.run("--prefix", str(prefix), "--", "--browser", "no-such-browser")
    assert failed.returncode != 0
    assert "back as it was" in failed.stderr
    assert installer.manifest.read_bytes() == registered
    assert subprocess.run([host, "-V"], capture_output=True, timeout=30).returncode == 0
    assert sorted(p.name for p in prefix.iterdir()) == ["venv"]

    # --uninstall without --prefix finds the recorded one.
    removed = installer.run("--uninstall")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert not prefix.exists()
    assert snapshot(*watched) == before
    assert not (tmp_path / "state").exists()
    again = installer.run("--uninstall")
    assert again.returncode == 1 and "nothing installed" in again.stderr


def test_a_failed_first_install_leaves_nothing_behind(
    installer: Installer, tmp_path: Path, env: dict[str, str]
) -> None:
    watched = watched_dirs(env, tmp_path)
    before = snapshot(*watched)
    prefix = installer.home / "prefix"
    failed = installer.run("--prefix", str(prefix), "--", "--browser", "no-such-browser")
    assert failed.returncode != 0
    assert "unknown browser" in failed.stderr and "back as it was" in failed.stderr
    assert not prefix.exists()
    assert not (tmp_path / "state").exists()
    assert snapshot(*watched) == before
    assert os.listdir(installer.env["TMPDIR"]) == []  # its build copy is gone too


def test_install_sh_refuses_unknown_options_and_an_old_python(installer: Installer) -> None:
    wrong = installer.run("--venv")
    assert wrong.returncode == 2 and "unknown option --venv" in wrong.stderr
    installer.env["PYTHON"] = "/nonexistent/python3"
    missing = installer.run("--prefix", str(installer.home / "prefix"))
    assert missing.returncode == 1 and "missing or older than 3.11" in missing.stderr
    assert not (installer.home / "prefix").exists()
    assert os.listdir(installer.home) == []
