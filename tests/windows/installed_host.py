"""The host under test, as the installed MSI's executable started the way Chrome on Windows
starts it: the `PEDELEC_TEST_HOST_CMD` of as_installed_msi.py, run on Linux between a
black-box test and Wine.

    installed_host.py [HOST ARGUMENTS...]

It names the test's directories (PEDELEC_HOME and the host's config, state and log dirs)
to Windows through Z:, sets `checkRuntimePid: false` in the test's config.json (Wine says
pid 0 owns every other process's socket, so no Core could be verified: docs/security.md),
then becomes the lane's Windows Python running chrome_start.py: HKCU ->
cc.isaaclin.pedelec.json -> `cmd.exe /d /s /c ""<exe>" chrome-extension://<id>/
--parent-window=0"`, or the test's own arguments after the executable's path. Its stdin
and stdout are the test's pipes; its exit status is the host's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from native_host import HOST_NAME
from native_host.install.locations import EXTENSION_ID_RE
from tests.support.wine import DRIVER, LANE, windows_path, wine_environment

PATH_VARIABLES = (
    "PEDELEC_HOME",
    "PEDELEC_NATIVE_HOST_CONFIG_DIR",
    "PEDELEC_NATIVE_HOST_STATE_DIR",
    "PEDELEC_NATIVE_HOST_LOG_DIR",
)
CONFIG_FILE = "config.json"


def windows_environment(env: dict[str, str]) -> dict[str, str]:
    """The test's environment with its directories named as Windows names them."""
    named = {}
    for name in PATH_VARIABLES:
        value = env.get(name, "")
        if value.startswith("/"):
            named[name] = windows_path(Path(value))
        elif value:
            named[name] = value
    others = {k: v for k, v in env.items() if k.startswith("PEDELEC_") and k not in named}
    return {**others, **named}


def unverified_core(config_dir: str) -> None:
    """`checkRuntimePid: false` in the test's config.json, whatever else it holds; a file
    that is not a JSON object is left as the test wrote it (the host ignores it)."""
    if not config_dir.startswith("/"):
        return
    path = Path(config_dir) / CONFIG_FILE
    try:
        config = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        return
    if isinstance(config, dict) and "checkRuntimePid" not in config:
        config["checkRuntimePid"] = False
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config))


def chrome_start_arguments(args: list[str]) -> list[str]:
    """Chrome's own arguments for one official-looking origin; the test's otherwise."""
    if len(args) == 1 and args[0].startswith("chrome-extension://"):
        extension_id = args[0].removeprefix("chrome-extension://").removesuffix("/")
        if EXTENSION_ID_RE.match(extension_id) and args[0].endswith("/"):
            return ["--extension-id", extension_id]
    return ["--host-args", json.dumps(args)]


def main() -> None:
    env = dict(os.environ)
    unverified_core(env.get("PEDELEC_NATIVE_HOST_CONFIG_DIR", ""))
    command = [
        "wine",
        str(LANE.python),
        windows_path(DRIVER),
        "--registry",
        HOST_NAME,
        *chrome_start_arguments(sys.argv[1:]),
    ]
    os.execvpe("wine", command, wine_environment(windows_environment(env)))


if __name__ == "__main__":
    main()
