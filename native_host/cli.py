"""Entry point: relay mode (what Chrome runs) or one of the subcommands.

Relay mode applies unless argv[1] is exactly a subcommand word (spec 7.11 a), so
Chrome's `chrome-extension://<id>/` and `--parent-window=N` arguments always relay.
Subcommands are imported lazily: a relay start never loads them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "dev-core": ("native_host.devcore.cli", "run the development Core on loopback"),
    "demo": ("native_host.demo", "walk a full session through the host against the dev Core"),
    "origins": ("native_host.origins_cli", "show or change the origin policy"),
    "install": ("native_host.install.cli", "register the host with installed browsers"),
    "uninstall": ("native_host.install.cli", "remove what `install` wrote"),
    "doctor": ("native_host.install.doctor", "explain what stops the host from working"),
}


def _usage() -> str:
    lines = [
        "usage: pedelec-native-host chrome-extension://<id>/   (run by the browser)",
        "       pedelec-native-host <command> [options]",
        "",
        "commands:",
    ]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    lines += ["  version    print the version"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch on argv[1]; anything that is not a subcommand word runs the relay."""
    args = list(sys.argv[1:] if argv is None else argv)
    word = args[0] if args else None
    if word in SUBCOMMANDS:
        module = importlib.import_module(SUBCOMMANDS[word][0])
        result: int = module.main(args)
        return result
    if word in ("version", "--version"):
        from native_host import __version__

        sys.stdout.write(f"pedelec-native-host {__version__}\n")
        return 0
    if word in ("help", "--help", "-h"):
        sys.stdout.write(_usage() + "\n")
        return 0
    from native_host.relay import run_relay

    return run_relay(args)
