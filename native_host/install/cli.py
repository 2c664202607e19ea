"""`pedelec-native-host install|uninstall|tidy`: argv[0] is the word, the rest are
options."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from native_host.install import installer, locations, uninstall
from native_host.install.locations import Scope, UnsupportedPlatformError
from native_host.usage import EXIT_USAGE, Parser, existing_parent

USAGE_ERROR = EXIT_USAGE
"""Every usage error of every subcommand exits with it (`native_host.usage`)."""


def browser_names(verb: str) -> str:
    """The `--browser` help: the names this system knows, any case."""
    try:
        names = [row.name for row in locations.rows_for(sys.platform)]
    except UnsupportedPlatformError:
        names = []
    listed = f": all, {', '.join(names)}" if names else ""
    return f"browser to {verb}, repeatable, in any case{listed}"


def own_command() -> str:
    """How to run this program again from a terminal: its bare name when that finds this
    very program on PATH, else its full path (a tarball's or a venv's program, the MSI's
    executable), quoted for the shell."""
    program = sys.executable if getattr(sys, "frozen", False) else sys.argv[0]
    if os.path.basename(program) in ("__main__.py", "-c", ""):
        return f"{shlex.quote(sys.executable)} -m native_host"
    name = os.path.basename(program)
    found = shutil.which(name)
    try:
        if found is not None and os.path.samefile(found, program):
            return os.path.splitext(name)[0] if sys.platform == "win32" else name
    except OSError:
        pass
    full = os.path.abspath(program)
    return f'"{full}"' if sys.platform == "win32" else shlex.quote(full)


def next_step() -> str:
    """What install prints last, as installers/install.sh does: the check to run."""
    command = own_command()
    line = f"next: check that each browser can start the host: {command} doctor"
    if command.startswith('"'):  # Windows, by full path: PowerShell needs its call operator
        line += f"  (in PowerShell: & {command} doctor)"
    return line


def add_user_data_dir_option(parser: argparse.ArgumentParser, verb: str) -> None:
    """`--user-data-dir DIR...`: one profile root, as a browser started with it sees it."""
    parser.add_argument(
        "--user-data-dir",
        action="extend",
        nargs="+",
        type=existing_parent,
        default=[],
        metavar="DIR",
        help=f"{verb} DIR/NativeMessagingHosts (a browser started with --user-data-dir=DIR; "
        "DIR's parent folder must exist)",
    )


def _install_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pedelec-native-host install",
        description="Register the host with the browsers installed for this user.",
    )
    parser.add_argument(
        "--browser",
        action="extend",
        nargs="+",
        metavar="NAME",
        help=browser_names("register")
        + " (default: every browser installed: its program or its user data dir found)",
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
    parser.add_argument(
        "--flatpak",
        action="store_true",
        help="also register Flatpak browsers: writes a wrapper inside the sandbox that starts "
        "the host with `flatpak-spawn --host` (needs the permission --flatpak-grant gives)",
    )
    parser.add_argument(
        "--flatpak-grant",
        action="store_true",
        help="with --flatpak: also run `flatpak override --user "
        "--talk-name=org.freedesktop.Flatpak APP` (lets the browser run any program outside "
        "its sandbox)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write the launcher even when this interpreter lives in a cache, a temporary "
        "directory or a source checkout",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be written")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="when no browser is found, list every user data dir looked for",
    )
    return parser


def _uninstall_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pedelec-native-host uninstall",
        description="Remove exactly what `install` wrote (per its install record).",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be removed")
    return parser


def _tidy_parser() -> argparse.ArgumentParser:
    return Parser(
        prog="pedelec-native-host tidy",
        description="Remove the older versions installed beside this one that no host runs "
        "from any more (the MSIs run it as they install).",
    )


def main(argv: Sequence[str], system_root: Path = Path("/")) -> int:
    """Run `install`, `uninstall` or `tidy`: exit 2 on a usage error, 1 with one `error:`
    line on any other problem. `system_root`: where the browsers' system folders are
    (tests)."""
    word, rest = argv[0], list(argv[1:])
    try:
        ctx = installer.default_environment(sys.stdout, system_root)
        if word == "tidy":
            _tidy_parser().parse_args(rest)
            installer.tidy(ctx)
            return 0
        if word == "uninstall":
            args = _uninstall_parser().parse_args(rest)
            uninstall.uninstall(ctx, dry_run=args.dry_run)
            return 0
        parser = _install_parser()
        args = parser.parse_args(rest)
        if args.flatpak_grant and not args.flatpak:
            parser.error("--flatpak-grant needs --flatpak")
        options = installer.InstallOptions(
            browsers=tuple(args.browser) if args.browser else None,
            scope=Scope(args.scope),
            extension_ids=tuple(args.extension_id),
            host_path=args.host_path,
            user_data_dirs=tuple(args.user_data_dir),
            dry_run=args.dry_run,
            flatpak=args.flatpak,
            flatpak_grant=args.flatpak_grant,
            force=args.force,
            verbose=args.verbose,
        )
        installer.install(options, ctx)
        if not options.dry_run:
            sys.stdout.write(next_step() + "\n")
    except installer.UsageError as exc:
        sys.stderr.write(f"pedelec-native-host {word}: error: {exc}\n")
        return USAGE_ERROR
    except (installer.InstallError, UnsupportedPlatformError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except PermissionError as exc:
        sys.stderr.write(
            f"error: {exc.strerror}: {exc.filename} "
            "(system scope needs root, or Administrator on Windows)\n"
        )
        return 1
    except OSError as exc:  # a full disk, a read-only file system, ...
        sys.stderr.write(f"error: {exc.strerror or exc}: {exc.filename or ''}\n")
        return 1
    return 0
