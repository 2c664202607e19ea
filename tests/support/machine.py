"""A machine of the test's own for `install`: its system folders (/opt, /usr/lib,
/Applications, /var/lib/flatpak, /snap) under a root the test chooses, so no browser
program of the real machine counts and the test plants the ones it wants
(`native_host.install.programs`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.checkout import REPO


def install_cli(
    env: dict[str, str], system_root: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`pedelec-native-host install|uninstall ARGS` in a process of its own, as a user
    runs it, with the browsers' system folders under `system_root`."""
    code = (
        "import sys; from pathlib import Path; from native_host.install.cli import main; "
        f"sys.exit(main(sys.argv[1:], system_root=Path({str(system_root)!r})))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False,
    )  # fmt: skip
