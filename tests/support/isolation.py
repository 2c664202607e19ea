"""A home of the suite's own: no test writes into the home of the person running it
(issue 33). A pytest plugin, loaded by tests/conftest.py.

Before anything is collected, each test process points HOME, the XDG folders, the
host's own folders and the Pedelec home (on Windows the profile folders too) into a
temporary folder of its own, so a host that a test starts without the `env` fixture
(an argv case of tests/test_cli.py, say) writes its log and its launch lock there,
never beside the developer's own host's. Tests that need other places still set them,
as the `env` fixture does.

It also checks that this held. A home someone lives in changes while the suite runs
(a browser, a shell, a running Pedelec host), so no write there can be told apart from
one of the suite's; an empty home cannot change on its own. When the run starts with
an empty (or missing) HOME, as `.ci/run` starts the README's test command, the
controlling process fails the run if that home is not empty at the end, naming what
appeared. In a lived-in home the summary says the check did not run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

SESSION_ROOT_VARIABLE = "PEDELEC_TEST_SESSION_ROOT"
"""Set by the controlling process: its workers make their homes under the same folder."""
SHOWN_ENTRIES = 20

HOME_LAYOUT: dict[str, dict[str, str]] = {
    "posix": {
        "HOME": "",
        "XDG_CONFIG_HOME": ".config",
        "XDG_DATA_HOME": ".local/share",
        "XDG_STATE_HOME": ".local/state",
        "XDG_CACHE_HOME": ".cache",
        "XDG_RUNTIME_DIR": "runtime",
    },
    "nt": {
        "USERPROFILE": "",
        "LOCALAPPDATA": "AppData/Local",
        "APPDATA": "AppData/Roaming",
    },
}
"""Per `os.name`: the variables that name the user's folders, and where each points
inside a test process's home. Only the running system's: a Windows variable set on
Linux would reach the Windows programs of the Wine lane, and mislead them."""
HOST_FOLDERS = {
    "PEDELEC_HOME": "pedelec-home",
    "PEDELEC_NATIVE_HOST_CONFIG_DIR": "host/config",
    "PEDELEC_NATIVE_HOST_STATE_DIR": "host/state",
    "PEDELEC_NATIVE_HOST_LOG_DIR": "host/log",
}
"""The Desktop's folder (runtime.json, app-launch.json) and the host's own folders."""

_started_home = pytest.StashKey[Path | None]()
_was_empty = pytest.StashKey[bool]()
_session_root = pytest.StashKey[Path]()
_verdict = pytest.StashKey[str]()


def _home_variable() -> str:
    return "USERPROFILE" if os.name == "nt" else "HOME"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def point_into(home: Path) -> dict[str, str]:
    """The variables of this system's user folders and the host's folders, pointing
    into `home` (created, private)."""
    variables: dict[str, str] = {}
    for variable, relative in HOME_LAYOUT["nt" if os.name == "nt" else "posix"].items():
        variables[variable] = str(home.joinpath(*relative.split("/")) if relative else home)
    for variable, relative in HOST_FOLDERS.items():
        variables[variable] = str(home.joinpath(*relative.split("/")))
    for folder in variables.values():
        Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
    return variables


def entries(home: Path) -> list[str]:
    """Everything under `home`, relative to it and sorted: [] when it is empty or
    missing."""
    if not home.is_dir():
        return [] if not home.exists() else ["(the home itself is no longer a folder)"]
    found = []
    for root, folders, names in os.walk(home):
        for name in folders + names:
            found.append(os.path.relpath(os.path.join(root, name), home))
    return sorted(found)


def pytest_configure(config: pytest.Config) -> None:
    if _is_worker(config):
        root = Path(os.environ[SESSION_ROOT_VARIABLE])
        name = str(config.workerinput["workerid"])  # type: ignore[attr-defined]
    else:
        started = os.environ.get(_home_variable(), "")
        home = Path(started) if started else None
        config.stash[_started_home] = home
        config.stash[_was_empty] = home is not None and entries(home) == []
        root = Path(tempfile.mkdtemp(prefix="pedelec-tests-home-"))
        config.stash[_session_root] = root
        os.environ[SESSION_ROOT_VARIABLE] = str(root)
        name = "main"
    os.environ.update(point_into(root / name))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controlling process: fail the run if the empty home it started with is not
    empty now."""
    config = session.config
    if _is_worker(config) or config.stash.get(_started_home, None) is None:
        return
    home = config.stash[_started_home]
    if not config.stash[_was_empty]:
        config.stash[_verdict] = f"home check: not run, {home} was not empty at the start"
        return
    written = entries(home)
    if not written:
        config.stash[_verdict] = f"home check: {home} is still empty"
        return
    shown = "\n  ".join(written[:SHOWN_ENTRIES])
    more = (
        f"\n  ... and {len(written) - SHOWN_ENTRIES} more" if len(written) > SHOWN_ENTRIES else ""
    )
    config.stash[_verdict] = (
        f"home check FAILED: the run wrote into {home}, which was empty at the start:\n"
        f"  {shown}{more}"
    )
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    verdict = terminalreporter.config.stash.get(_verdict, None)
    if verdict is not None:
        terminalreporter.write_line(verdict, red="FAILED" in verdict)


def pytest_unconfigure(config: pytest.Config) -> None:
    root = config.stash.get(_session_root, None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)
