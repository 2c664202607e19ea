"""Run the gateway's `launcher.ensure_running()` in a process of its own, as one host process would.

Usage: python run_launcher.py GO_FILE. Waits for GO_FILE to exist (so several
processes start at the same moment), then prints one JSON line: `{"ok":true}` or the
wire error object. Settings come from the environment (PEDELEC_HOME and friends).
"""

from __future__ import annotations

import json
import os
import sys
import time

from native_host.config import load_config
from native_host.errors import HostError
from native_host.gateway import CoreGateway


def main() -> None:
    env = dict(os.environ)
    config = load_config(env)
    gateway = CoreGateway(config, env)
    go = sys.argv[1]
    print(json.dumps({"waiting": os.getpid()}), flush=True)
    while not os.path.exists(go):
        time.sleep(0.002)
    try:
        gateway.launcher.ensure_running()
    except HostError as exc:
        print(json.dumps(exc.to_error()), flush=True)
    else:
        print(json.dumps({"ok": True}), flush=True)


if __name__ == "__main__":
    main()
