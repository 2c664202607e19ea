"""`pedelec-native-host origins ...`: show or change the origin policy (spec 7.11 c).

Works on the same `origins.json` as the host, through the same locked, atomic store.
Exit status: 0 done, 1 the policy file is unusable or cannot be written, 2 bad arguments
(including an invalid origin or block entry).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from native_host.errors import HostError
from native_host.origins import BlockPattern, InvalidOriginError
from native_host.policy import MODES, PolicyStore
from native_host.usage import Parser

PROG = "pedelec-native-host origins"
EXIT_OK, EXIT_POLICY, EXIT_USAGE = 0, 1, 2

MODE_MEANING = {
    "extension": "the extension's per-site approval is trusted; the block list applies",
    "strict": "only origins on the approved list are relayed; the block list applies",
}


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Show or change which web origins may reach Pedelec through this host.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="show the mode, approved origins and block list")
    listing.add_argument("--json", action="store_true", help="print the policy as JSON")
    for name, help_text in (
        ("approve", "add an origin to the approved list (needed in strict mode)"),
        ("revoke", "remove an origin from the approved list"),
    ):
        commands.add_parser(name, help=help_text).add_argument(
            "origin", metavar="ORIGIN", help="e.g. https://app.example.com"
        )
    for name, help_text in (
        ("block", "refuse an origin, or every subdomain with https://*.example.com"),
        ("unblock", "remove an entry from the block list"),
    ):
        commands.add_parser(name, help=help_text).add_argument(
            "pattern", metavar="PATTERN", help="an origin or <scheme>://*.<domain>[:<port>]"
        )
    mode = commands.add_parser("mode", help="extension (default) or strict")
    mode.add_argument("mode", choices=MODES)
    return parser


def main(argv: list[str]) -> int:
    """Run one `origins` command; argv[0] is the word `origins`."""
    args = _parser().parse_args(argv[1:])
    # The store logs what it ignores for the host's log file; here the same problems are
    # printed in context, so keep Python's last-resort stderr handler quiet.
    logging.getLogger("native_host").addHandler(logging.NullHandler())
    store = PolicyStore.for_env(os.environ)
    problem = store.problem()
    if problem is not None:
        _print_invalid(problem)
        return EXIT_POLICY
    try:
        _run(store, args)
    except InvalidOriginError as exc:
        value = getattr(args, "origin", None) or getattr(args, "pattern", None)
        what = "origin" if args.command in ("approve", "revoke") else "block entry"
        sys.stderr.write(
            f"{PROG} {args.command}: error: {value!r} is not a valid {what}: {exc.reason}\n"
        )
        return EXIT_USAGE
    except HostError as exc:
        sys.stderr.write(f"error: {exc.message}: {exc.details.get('error')}\n")
        return EXIT_POLICY
    return EXIT_OK


def _run(store: PolicyStore, args: argparse.Namespace) -> None:
    out = sys.stdout
    if args.command == "list":
        policy = store.list()
        if args.json:
            out.write(json.dumps(policy, indent=2, ensure_ascii=False) + "\n")
        else:
            out.write(_describe(store, policy))
    elif args.command == "approve":
        origin = store.approve(args.origin)["origin"]
        out.write(f"Approved {origin}\n")
        if store.list()["mode"] == "extension":
            out.write(
                f"Note: the mode is 'extension', where approvals are not required; "
                f"run `{PROG} mode strict` to require them.\n"
            )
    elif args.command == "revoke":
        result = store.revoke(args.origin)
        verb = "Revoked" if result["revoked"] else "Not approved, nothing to revoke:"
        out.write(f"{verb} {result['origin']}\n")
    elif args.command == "block":
        out.write(f"Blocked {store.block(args.pattern)['pattern']}\n")
    elif args.command == "unblock":
        result = store.unblock(args.pattern)
        verb = "Unblocked" if result["unblocked"] else "Not on the block list:"
        out.write(f"{verb} {args.pattern}\n")
    else:
        mode = store.set_mode(args.mode)["mode"]
        out.write(f"Mode set to {mode}: {MODE_MEANING[mode]}.\n")


def _describe(store: PolicyStore, policy: dict[str, Any]) -> str:
    """The human form of `list`."""
    exists = "" if os.path.exists(store.path) else " (no file yet: defaults apply)"
    lines = [
        f"Policy file: {store.path}{exists}",
        f"Mode: {policy['mode']} ({MODE_MEANING[policy['mode']]})",
        "Approved origins:" if policy["approved"] else "Approved origins: none",
    ]
    for entry in policy["approved"]:
        when = datetime.fromtimestamp(entry["approvedAt"] / 1000, tz=UTC)
        lines.append(f"  {entry['origin']}  (approved {when:%Y-%m-%d %H:%M} UTC)")
    lines.append("Blocked:" if policy["blocked"] else "Blocked: none")
    for entry in policy["blocked"]:
        try:
            BlockPattern.parse(entry)
            lines.append(f"  {entry}")
        except InvalidOriginError as exc:
            lines.append(f"  {entry}  (invalid, ignored: {exc.reason})")
    return "\n".join(lines) + "\n"


def _print_invalid(problem: str) -> None:
    sys.stderr.write(
        f"error: the origin policy file is not valid: {problem}\n"
        "Until it is fixed the host fails closed: every page request is refused with "
        "ORIGIN_NOT_APPROVED (reason policy_invalid).\n"
        "Fix the file by hand, or delete it to start over "
        "(that also clears every approval and block entry).\n"
    )
