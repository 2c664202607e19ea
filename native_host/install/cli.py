"""`pedelec-native-host install|uninstall`: argv[0] is the word, the rest are options."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from native_host.install import installer
from native_host.install.locations import Scope, UnsupportedPlatformError


def add_user_data_dir_option(parser: argparse.ArgumentParser, verb: str) -> None:
    """`--user-data-dir DIR...`: one profile root, as a browser started with it sees it."""
    parser.add_argument(
        "--user-data-dir",
        action="extend",
        nargs="+",
        type=Path,
        default=[],
        metavar="DIR",
        help=f"{verb} DIR/NativeMessagingHosts (a browser started with --user-data-dir=DIR)",
    )


def _install_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pedelec-native-host install",
        description="Register the host with the browsers installed for this user.",
    )
    parser.add_argument(
        "--browser",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="browser to register (repeatable; 'all' for every known one); "
        "default: every browser whose user data dir exists",
    )
    parser.add_argument(
        "--scope",
        choices=[s.value for s in Scope],
        default=Scope.USER.value,
        help="user: this user's browser dirs / HKCU (default); system: /etc, /Library or HKLM",
    )
    parser.add_argument(
        "--extension-id",
        action="extend",
        nargs="+",
        default=[],
        metavar="ID",
        help="extra extension id to allow besides the official one (repeatable)",
    )
    parser.add_argument(
        "--host-path",
        type=Path,
        metavar="PATH",
        help="executable the manifest points at (default: this build)",
    )
    add_user_data_dir_option(parser, "register in")
    parser.add_argument("--dry-run", action="store_true", help="print what would be written")
    return parser


def _uninstall_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pedelec-native-host uninstall",
        description="Remove exactly what `install` wrote (per its install record).",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be removed")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run `install` or `uninstall`; exit 1 with one `error:` line on a problem."""
    word, rest = argv[0], list(argv[1:])
    try:
        ctx = installer.default_environment(sys.stdout)
        if word == "uninstall":
            args = _uninstall_parser().parse_args(rest)
            installer.uninstall(ctx, dry_run=args.dry_run)
            return 0
        args = _install_parser().parse_args(rest)
        options = installer.InstallOptions(
            browsers=tuple(args.browser) if args.browser else None,
            scope=Scope(args.scope),
            extension_ids=tuple(args.extension_id),
            host_path=args.host_path,
            user_data_dirs=tuple(args.user_data_dir),
            dry_run=args.dry_run,
        )
        installer.install(options, ctx)
    except (installer.InstallError, UnsupportedPlatformError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except PermissionError as exc:
        sys.stderr.write(
            f"error: {exc.strerror}: {exc.filename} "
            "(system scope needs root, or Administrator on Windows)\n"
        )
        return 1
    return 0
