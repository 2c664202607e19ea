"""Flatpak browsers (spec 5.4): the in-sandbox wrapper, the permission it needs, and how
to tell whether that permission is there.

A Flatpak browser starts the manifest's `path` inside its sandbox, where this host's
interpreter and the Pedelec home are out of reach. The wrapper lives in the app's own
directory (`~/.var/app/<app-id>`, visible at the same path inside and outside) and hands
its stdio to the real host with `flatpak-spawn --host`, which talks to the session's
`org.freedesktop.Flatpak` service. The app may talk to that service only after
`flatpak override --user --talk-name=org.freedesktop.Flatpak <app-id>`, and then it can
start *any* program outside its sandbox: the installer asks before granting it.

Pure text in, text out, except `session_helper_service`, which looks at the file system.
"""

from __future__ import annotations

import configparser
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

TALK_NAME = "org.freedesktop.Flatpak"
"""The D-Bus name `flatpak-spawn --host` talks to (the host's flatpak-session-helper)."""
BUS_POLICY_SECTION = "Session Bus Policy"
GRANTING_POLICIES = ("talk", "own")
SERVICE_FILE = f"dbus-1/services/{TALK_NAME}.service"
WRAPPER_MARK = "# Written by `pedelec-native-host install --flatpak`"
SPAWN = "flatpak-spawn"
SPAWN_OPTIONS = ("--host", "--watch-bus")
"""`--watch-bus`: the host dies with the wrapper, so Chrome's kill of a stuck host reaches it."""

COST = (
    "this lets {app} start any program on your machine outside its sandbox, not only "
    "this host; undo it with `flatpak override --user --no-talk-name="
    f"{TALK_NAME} {{app_id}}` (or `flatpak override --user --reset {{app_id}}`)"
)


def wrapper_text(host_path: str) -> bytes:
    """The wrapper a Flatpak browser runs: start the real host outside the sandbox with
    the same arguments and the same stdio."""
    return (
        "#!/bin/sh\n"
        f"{WRAPPER_MARK}.\n"
        "# Runs inside the browser's Flatpak sandbox and starts the host outside it; needs\n"
        f"# `flatpak override --user --talk-name={TALK_NAME} <app-id>`.\n"
        f'exec {SPAWN} {" ".join(SPAWN_OPTIONS)} {shlex.quote(host_path)} "$@"\n'
    ).encode()


def wrapper_target(text: str) -> str | None:
    """The host a wrapper written by `wrapper_text` starts, or None if it is not one."""
    if WRAPPER_MARK not in text:
        return None
    for line in text.splitlines():
        if not line.startswith(f"exec {SPAWN} "):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            return None
        options = words[2 : 2 + len(SPAWN_OPTIONS)]
        if tuple(options) == SPAWN_OPTIONS and len(words) == 4 + len(SPAWN_OPTIONS):
            return words[2 + len(SPAWN_OPTIONS)]
    return None


def grant_command(app_id: str) -> list[str]:
    """What `install --flatpak-grant` runs (and otherwise prints)."""
    return ["flatpak", "override", "--user", f"--talk-name={TALK_NAME}", app_id]


def cost(label: str, app_id: str) -> str:
    """What the grant gives away, in one sentence."""
    return COST.format(app=label, app_id=app_id)


def grants_talk(override_text: str) -> bool | None:
    """Whether an override file lets the app talk to `org.freedesktop.Flatpak`: True,
    False (explicitly denied or not mentioned), None when the file cannot be parsed."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep D-Bus names
    try:
        parser.read_string(override_text)
    except configparser.Error:
        return None
    if not parser.has_section(BUS_POLICY_SECTION):
        return False
    return parser.get(BUS_POLICY_SECTION, TALK_NAME, fallback="").strip() in GRANTING_POLICIES


def session_helper_service(env: Mapping[str, str]) -> Path | None:
    """The D-Bus service file of the host's flatpak-session-helper, the other end of
    `flatpak-spawn --host` (Debian's `flatpak` package installs it), if present."""
    home_data = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME", ""), ".local/share")
    system = env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    for directory in [home_data, *system.split(":")]:
        if directory:
            candidate = Path(directory) / SERVICE_FILE
            if candidate.is_file():
                return candidate
    return None
