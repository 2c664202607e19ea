"""A pytest plugin: every black-box test of the run talks to the installed MSI's Windows
executable, started the way Chrome on Windows starts it (installed_host.py).

    PEDELEC_WINDOWS_LANE=1 [PEDELEC_TEST_MSI_SCOPE=per-machine] python -m pytest \\
        -p tests.windows.as_installed_msi tests/test_golden.py tests/test_relay_rules.py

Before the run it installs the MSI packaging/windows/build.py wrote (dist/windows) with
Wine's msiexec, and points `PEDELEC_TEST_HOST_CMD` at installed_host.py and
`PEDELEC_TEST_HOST_OS` at win32 (tests/support/host_os.py); after it, it removes the
package. `PEDELEC_TEST_MSI_SCOPE=per-machine` installs the per-machine MSI instead, with
Chrome's machine policy NativeMessagingUserLevelHosts set to 0 for the run, as a managed
machine has it: the host is then found in HKLM, HKCU being passed over as Chrome does
(chrome_start.py). Only the run's main process does any of this (xdist's workers inherit
the environment). Anything missing fails the run before a test starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.host import HOST_CMD_ENV
from tests.support.host_os import HOST_OS_ENV, WINDOWS
from tests.support.wine import LANE_ENV, lane_problem, stop_wine

WRAPPER = Path(__file__).resolve().parent / "installed_host.py"
SCOPE_ENV = "PEDELEC_TEST_MSI_SCOPE"
_installed: list[tuple[Path, str]] = []


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    from tests.support import msi

    if os.environ.get(LANE_ENV) != "1":
        raise pytest.UsageError(f"as_installed_msi runs in the Windows lane's step: {LANE_ENV}=1")
    problem = lane_problem()
    if problem is not None:
        raise pytest.UsageError(f"Windows lane: {problem}")
    scope = os.environ.get(SCOPE_ENV, msi.PER_USER)
    if scope not in (msi.PER_USER, msi.PER_MACHINE):
        raise pytest.UsageError(f"{SCOPE_ENV} is {msi.PER_USER} or {msi.PER_MACHINE}")
    found = msi.msi_in(msi.DIST, scope)
    if found is None:
        raise pytest.UsageError(f"expected one {scope} MSI in {msi.DIST}: {msi.BUILD_IT}")
    if msi.products(msi.PER_USER) or msi.products(msi.PER_MACHINE):
        raise pytest.UsageError("the lane's prefix already holds a Pedelec MSI")
    done = msi.install(found)
    if done.returncode != 0:
        raise pytest.UsageError(f"msiexec /i failed: {done.stderr.decode(errors='replace')}")
    _installed.append((found, scope))
    if scope == msi.PER_MACHINE:
        msi.set_user_level_hosts(False)
    os.environ[HOST_CMD_ENV] = f"{sys.executable} {WRAPPER}"
    os.environ[HOST_OS_ENV] = WINDOWS


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _installed:
        return
    from tests.support import msi

    stop_wine()
    package, scope = _installed.pop()
    if scope == msi.PER_MACHINE:
        msi.set_user_level_hosts(None)
    msi.uninstall(package)
    stop_wine()  # its server makes sockets in this network namespace: none may outlive it
