"""`doctor --report FILE`: one file a user can attach to a bug report.

It holds what a maintainer asks for first: versions, the system, every finding and the
verdict, each registration and the manifest it leads to, what `install` recorded, the
effective settings, and the last lines of the host's log. It holds nothing private:
paths under the home read `~`, extension ids other than Pedelec's official one are
replaced (`<extension id N>`, the same id the same name), any value of the environment
is replaced by its variable's name (a token kept there cannot leak through a message
that quotes it), settings are the host's parsed values (never the file's text), and the
log's lines are the default level's: metadata, never a prompt, a message, a tool
argument or a token (trace lines, which hold bodies, are left out).

The file is written once, whole, private (0600), by the host's one atomic write, and
never through a symbolic link someone planted at its name.
"""

from __future__ import annotations

import json
import os
import platform
import re
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from native_host import OFFICIAL_EXTENSION_ID, __version__, files, paths
from native_host.install.doctor.report import Finding
from native_host.install.record import InstallRecord

LOG_TAIL_LINES = 200
LOG_LEVELS_KEPT = frozenset({"INFO", "WARNING", "ERROR", "CRITICAL"})
_LOG_HEADER = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \d+ ([A-Z]+) ")
_ID = re.compile(r"(?<![a-z])[a-p]{32}(?![a-z])")
MIN_ENV_VALUE = 8
"""Shorter values of the environment (`1`, `info`, `C.UTF-8`) are left as they are."""
_ENV_KEPT = frozenset({"_"})
"""The shell's last command: the path of this very program, not a secret."""


class ReportRefused(Exception):
    """The report file cannot be written where it was asked (one line for the user)."""


@dataclass(frozen=True)
class Seen:
    """A registration doctor followed: who reads it, where, and the manifest it names."""

    subject: str
    where: str
    manifest: Mapping[str, Any] | None


class Redactor:
    """Everything the report says passes through `clean`."""

    def __init__(self, home: PurePath, env: Mapping[str, str]) -> None:
        homes = {str(home), os.path.realpath(str(home))} - {"", "/", "\\"}
        windows = any(":" in h or "\\" in h for h in homes)  # names compare in any case
        self.homes = [
            re.compile(
                r"(?<![\w.-])" + re.escape(h) + r"(?![\w.-])", re.IGNORECASE if windows else 0
            )
            for h in sorted(homes, key=len, reverse=True)
        ]
        self.ids: dict[str, str] = {}
        values = []
        for name, value in env.items():
            if name in _ENV_KEPT or value == OFFICIAL_EXTENSION_ID:
                continue
            shown = self._home(value)
            if len(shown) >= MIN_ENV_VALUE and shown != "~":
                values.append((shown, name))
        self.values = sorted(values, key=lambda pair: len(pair[0]), reverse=True)

    def _home(self, text: str) -> str:
        for home in self.homes:
            text = home.sub("~", text)
        return text

    def _id(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if found == OFFICIAL_EXTENSION_ID:
            return found
        return self.ids.setdefault(found, f"<extension id {len(self.ids) + 1}>")

    def clean(self, text: str) -> str:
        text = _ID.sub(self._id, text)
        text = self._home(text)
        for value, name in self.values:
            text = text.replace(value, f"${name}")
        return text


def log_tail(directory: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines of the host's log at the default level and above, through the safe
    reader; a record's continuation lines (a traceback) go with its first line."""
    path = os.path.join(directory, "pedelec-native-host.log")
    try:
        raw = files.read_trusted(path, max_bytes=4 * 1_048_576)
    except files.FileRefusedError as exc:
        return [f"(no log read: {exc.explanation})"]
    kept: list[str] = []
    keeping = False
    for line in raw.decode("utf-8", "replace").splitlines():
        header = _LOG_HEADER.match(line)
        if header is not None:
            keeping = header.group(1) in LOG_LEVELS_KEPT
        if keeping:
            kept.append(line)
    return kept[-lines:]


def _settings(env: Mapping[str, str]) -> list[str]:
    """The host's effective settings as it parses them, and which variables are set."""
    from native_host.config import SETTINGS, load_config

    config = load_config(env)
    path = os.path.join(paths.config_dir(env), paths.CONFIG_FILE)
    lines = [f"config.json: {path} ({'present' if os.path.lexists(path) else 'absent'})"]
    for setting in SETTINGS:
        value = getattr(config, setting.attr)
        shown = json.dumps(list(value) if isinstance(value, tuple) else value)
        lines.append(f"  {setting.key}: {shown}")
    lines += [f"  problem: {problem}" for problem in config.problems]
    named = sorted(name for name in env if name.startswith("PEDELEC_"))
    lines.append(f"environment: {', '.join(named) or 'no PEDELEC_ variable'} (values not shown)")
    return lines


def _record(record: InstallRecord | None) -> list[str]:
    if record is None:
        return ["none"]
    lines = [f"file {e.path} ({e.role}; {', '.join(e.browsers) or '-'})" for e in record.files]
    lines += [
        f"key {e.hive}\\{e.key} = {e.value} ({', '.join(e.browsers)})" for e in record.registry
    ]
    if record.config is not None:
        lines.append(
            f"config {record.config.path} (added ids: {', '.join(record.config.added_ids)})"
        )
    return lines


def compose(
    findings: Sequence[Finding],
    rendered: str,
    seen: Sequence[Seen],
    record: InstallRecord | None,
    env: Mapping[str, str],
    home: PurePath,
) -> str:
    """The report's text, redacted."""
    frozen = "a frozen bundle" if getattr(sys, "frozen", False) else "Python package"
    sections: list[tuple[str, list[str]]] = [
        (
            "Versions",
            [
                f"pedelec-native-host {__version__} ({frozen}, {sys.executable})",
                f"Python {platform.python_version()} ({platform.python_implementation()})",
                f"system: {platform.platform()} ({sys.platform}, {platform.machine()})",
                f"written: {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
            ],
        ),
        ("Findings and verdict (as `doctor` printed them)", rendered.splitlines()),
        ("Registrations and their manifests", _registrations(seen)),
        ("Install record", _record(record)),
        ("Settings", _settings(env)),
        (
            f"Host log: the last {LOG_TAIL_LINES} lines at the default level and above",
            log_tail(paths.log_dir(env)),
        ),
    ]
    text = [
        "# pedelec-native-host doctor report",
        "",
        "Attach this file to your bug report. Paths under your home read ~, extension ids "
        "other than Pedelec's official one and values of the environment are replaced, and "
        "no prompt, message, tool argument or token is in it.",
    ]
    for title, lines in sections:
        text += ["", f"## {title}", "", *lines]
    redactor = Redactor(home, env)
    return "\n".join(redactor.clean(line) for line in text) + "\n"


def _registrations(seen: Sequence[Seen]) -> list[str]:
    lines: list[str] = []
    for entry in seen:
        lines.append(f"{entry.subject}: {entry.where}")
        if entry.manifest is not None:
            body = json.dumps(entry.manifest, indent=2, ensure_ascii=False)
            lines += [f"    {line}" for line in body.splitlines()]
    return lines or ["none found"]


def write(path: Path, text: str) -> None:
    """Write the report: refused when its name is a symbolic link or anything but a
    regular file; otherwise replaced whole, 0600, by `files.atomic_write`."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ReportRefused(f"{path}: {exc.strerror or exc}") from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise ReportRefused(f"{path} is a symbolic link (refused: it could point anywhere)")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise ReportRefused(f"{path} exists and is not a regular file")
    try:
        files.atomic_write(path, text.encode("utf-8"), files.PRIVATE_FILE_MODE)
    except OSError as exc:
        raise ReportRefused(f"{path}: {exc.strerror or exc}") from None
