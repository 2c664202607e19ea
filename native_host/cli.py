"""Entry point: relay mode when the browser runs the host, otherwise a command.

The browser starts the host with the extension origin first (`chrome-extension://<id>/`,
plus `--parent-window=N` on Windows); some sandboxed-browser proxies pass no argument at
all, but then stdin is a pipe. Anything else is a person or a script, who gets a command
or a usage error (exit 2, as argparse does) — never a relay silently waiting for frames.

The decision imports nothing: a relay start loads only the relay, and the command
modules (argparse, pydantic, difflib for suggestions) are imported once a command is known.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a relay start does not import collections.abc
    from collections.abc import Sequence

PROG = "pedelec-native-host"
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "dev-core": ("native_host.devcore.cli", "run the development Core on loopback"),
    "demo": ("native_host.demo.cli", "walk a full session through the host against the dev Core"),
    "origins": ("native_host.origins_cli", "show or change the origin policy"),
    "install": ("native_host.install.cli", "register the host with installed browsers"),
    "uninstall": ("native_host.install.cli", "remove what `install` wrote"),
    "tidy": ("native_host.install.cli", "remove older versions no host runs from any more"),
    "doctor": ("native_host.install.doctor", "explain what stops the host from working"),
}
VERSION_WORDS = ("version", "-V", "--version")
HELP_WORDS = ("help", "-h", "--help")

# What a Chromium browser puts first on the host's command line (spec 1.1): the origin,
# and the flags it may add. Any of them first means the browser is the caller.
BROWSER_ARGUMENT_PREFIXES = (
    "chrome-extension://",
    "--parent-window=",
    "--reconnect-command=",
    "--native-messaging-connect-id=",
)

BARE_COMMAND_MESSAGE = (
    f"{PROG}: this program is started by the browser for the Pedelec extension.\n"
    f"try `{PROG} demo` or `{PROG} doctor`; `{PROG} help` lists every command.\n"
)


def started_by_browser(args: Sequence[str], stdin_is_terminal: bool) -> bool:
    """True when the browser (or a sandboxed-browser proxy) runs the host."""
    if args:
        return args[0].startswith(BROWSER_ARGUMENT_PREFIXES)
    return not stdin_is_terminal


def _usage() -> str:
    lines = [
        f"usage: {PROG} chrome-extension://<id>/   (run by the browser)",
        f"       {PROG} <command> [options]",
        "",
        "commands:",
    ]
    lines += [f"  {name:<14} {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    lines += [
        f"  {'help [COMMAND]':<14} this list, or the options of one command",
        f"  {'version':<14} print the version (also -V, --version)",
    ]
    return "\n".join(lines)


def _usage_error(kind: str, word: str, choices: Sequence[str]) -> int:
    """One argparse-style complaint on stderr, with the nearest valid word if there is one."""
    import difflib

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    suggestion = f", did you mean '{close[0]}'?" if close else ""
    sys.stderr.write(
        f"{PROG}: unknown {kind} '{word}'{suggestion} (`{PROG} help` lists the commands)\n"
    )
    return EXIT_USAGE


def _run_command(args: list[str]) -> int:
    import importlib

    module = importlib.import_module(SUBCOMMANDS[args[0]][0])
    result: int = module.main(args)
    return result


def _help(topics: list[str]) -> int:
    if not topics:
        sys.stdout.write(_usage() + "\n")
        return 0
    if len(topics) > 1:
        sys.stderr.write(f"{PROG}: help takes one command, got {len(topics)}\n")
        return EXIT_USAGE
    topic = topics[0]
    if topic in HELP_WORDS or topic in VERSION_WORDS:
        sys.stdout.write(_usage() + "\n")
        return 0
    if topic not in SUBCOMMANDS:
        return _usage_error("help topic", topic, list(SUBCOMMANDS))
    try:
        return _run_command([topic, "--help"])
    except SystemExit as done:  # argparse exits after printing the help
        return done.code if isinstance(done.code, int) else 0


def _version(extra: list[str]) -> int:
    if extra and extra[0] in HELP_WORDS:
        sys.stdout.write(f"usage: {PROG} version\n\nprint the version (also -V, --version)\n")
        return 0
    if extra:
        sys.stderr.write(f"{PROG}: version takes no arguments\n")
        return EXIT_USAGE
    from native_host import __version__

    sys.stdout.write(f"{PROG} {__version__}\n")
    return 0


def _end_on_interrupt() -> None:
    """Ctrl-C (SIGINT) ends the process at once and silently, as SIGTERM does: a relay
    keeps that to its end, a command until its own handling takes over (`main`, `usage`).
    Python's default raises KeyboardInterrupt wherever the code happens to be: a traceback
    in the log as an uncaught exception, or on the terminal. Chromium starts a host in
    the browser's own process group, so a browser started from a terminal passes its
    Ctrl-C to every host it runs. `_signal` is what `signal` wraps, without its 4 ms of
    enum."""
    import _signal  # type: ignore[import-not-found]  # typeshed has only `signal`

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def start(image: str) -> int:
    """What the launcher runs: the relay's modules from the start image at `image` when
    it can be used (`native_host.startimage`), then `main`."""
    _end_on_interrupt()
    gc.disable()  # see main: the image's modules are as permanent as imported ones
    from native_host import startimage

    return main(image=startimage.use(image))


def start_bundle() -> int:
    """What a bundle's own executable runs (packaging/windows/launcher.c): `start` with the
    sealed image beside it. The bundle is marked frozen, as freezers mark theirs, so
    `install` registers the executable itself and `doctor` starts it as Chrome would."""
    setattr(sys, "frozen", True)  # noqa: B010 - `sys` has no such attribute to assign
    from native_host.startimage import IMAGE_NAME

    return start(os.path.join(os.path.dirname(sys.executable), IMAGE_NAME))


def main(argv: Sequence[str] | None = None, image: str = "none") -> int:
    """Relay when the browser runs the host; dispatch a command; refuse anything else.

    `image` says how the launcher's start image fared (`startimage.use`), for the
    relay's first log line."""
    args = list(sys.argv[1:] if argv is None else argv)
    if started_by_browser(args, os.isatty(0)):
        _end_on_interrupt()
        # No garbage collection while the relay's modules load: they allocate thousands
        # of objects that live as long as the process and are never garbage. run_relay
        # freezes them out of every later collection and turns collection back on.
        gc.disable()
        from native_host.relay import run_relay

        return run_relay(args, image=image)
    gc.enable()  # `start` turned it off before it knew what was asked
    if not args:
        sys.stderr.write(BARE_COMMAND_MESSAGE)
        return EXIT_USAGE
    try:
        from native_host import usage

        usage.stop_on_interrupt()
        try:
            return _command(args)
        finally:
            usage.ignore_interrupts()
    except KeyboardInterrupt:
        # Every `finally` of the command has run: its temporary folders are gone and the
        # hosts it started are stopped (a second Ctrl-C is ignored until then).
        sys.stderr.write(f"{PROG} {args[0]}: interrupted\n")
        return EXIT_INTERRUPTED


def _command(args: list[str]) -> int:
    """A command, `version`, `help`, or a usage error for anything else."""
    word, rest = args[0], args[1:]
    if word in SUBCOMMANDS:
        return _run_command(args)
    if word in VERSION_WORDS:
        return _version(rest)
    if word in HELP_WORDS:
        return _help(rest)
    if word.startswith("-"):
        options = [w for w in (*VERSION_WORDS, *HELP_WORDS) if w.startswith("-")]
        return _usage_error("option", word, options)
    return _usage_error("command", word, [*SUBCOMMANDS, "help", "version"])
