"""The tools a user installs the host with, for the packaging tests: pipx and uv in a
throwaway virtualenv, the environment they run in, and a missing tool reported the CI's
way (a failure under CI=true, a skip on a developer's offline machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI") == "true"


def unavailable(what: str, detail: str) -> NoReturn:
    """Skip on a developer's offline machine; fail in CI, where nothing may be missing."""
    message = f"{what} unavailable: {detail.strip()[-2000:]}"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def run(
    command: list[str], timeout: float = 600, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


def pipx_and_uv(venv: Path) -> Path:
    """A virtualenv at `venv` with pipx and uv from PyPI; returns its bin directory."""
    made = run([sys.executable, "-m", "venv", str(venv)])
    if made.returncode != 0:
        unavailable("python -m venv", made.stderr)
    got = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pipx", "uv"])
    if got.returncode != 0:
        unavailable("pipx and uv from PyPI", got.stdout + got.stderr)
    return venv / "bin"


def tool_env(env: dict[str, str], home: Path, tmp_path: Path, tools: Path) -> dict[str, str]:
    """The isolated install environment (the `env` fixture's directories) with a user
    home outside the temporary directories, holding the tools' directories where pipx and
    uv put them, and nothing pointing back at this checkout."""
    environment = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        PATH=f"{home / '.local' / 'bin'}{os.pathsep}{tools}{os.pathsep}{env['PATH']}",
        PIPX_HOME=str(home / ".local" / "share" / "pipx"),
        PIPX_BIN_DIR=str(home / ".local" / "bin"),
        PIPX_MAN_DIR=str(home / ".local" / "share" / "man"),
        UV_TOOL_DIR=str(home / ".local" / "share" / "uv" / "tools"),
        UV_TOOL_BIN_DIR=str(home / ".local" / "bin"),
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
        # The system's trust store, as pip uses it (a proxy's CA may be there only).
        UV_SYSTEM_CERTS="1",
        UV_NATIVE_TLS="1",
    )
    (home / ".config" / "chromium").mkdir(parents=True)  # a user who has Chromium
    return environment
