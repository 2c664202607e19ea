"""The shell commands the docs give a user, read from the docs themselves, so what runs in
the tests (and in .ci/run) is exactly what a user copies.

A command is a line of a ```sh block (a trailing `# comment` and blank lines left out),
labelled by where it stands: the nearest heading above it, and the bold label of the list
item it sits in (`Remove it > Linux tarball` for `- **Linux tarball**:` under `## Remove it`).

    python3 -m tests.support.doc_commands README.md "Linux"

prints the commands under that label, one a line (.ci/run's tarball step runs them).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.checkout import REPO

USER_DOCS = ("README.md", "docs/install.md", "CONTRIBUTING.md")
"""The pages that tell a user (or a contributor) what to type."""
_HEADING = re.compile(r"^#{2,4} (.+)$")
_ITEM_LABEL = re.compile(r"^- \*\*(.+?)\*\*")
_FENCE = re.compile(r"^\s*```(\w*)\s*$")


@dataclass(frozen=True)
class Command:
    doc: str
    label: str
    text: str


def commands(doc: str, root: Path = REPO) -> list[Command]:
    """Every command of the ```sh blocks of `doc`, in order."""
    found: list[Command] = []
    section = label = ""
    language: str | None = None
    for line in (root / doc).read_text(encoding="utf-8").splitlines():
        fence = _FENCE.match(line)
        if fence is not None:
            language = None if language is not None else fence.group(1)
            continue
        if language is None:
            heading = _HEADING.match(line)
            item = _ITEM_LABEL.match(line)
            if heading is not None:
                section = label = heading.group(1)
            elif item is not None:
                label = f"{section} > {item.group(1).rstrip(':')}"
            continue
        if language != "sh":
            continue
        text = re.sub(r"\s+#\s.*$", "", line).strip()
        if text and not text.startswith("#"):
            found.append(Command(doc, label, text))
    return found


def labelled(doc: str, label: str, root: Path = REPO) -> list[str]:
    """The commands of `doc` under `label` (see the module doc)."""
    return [c.text for c in commands(doc, root) if c.label == label]


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(__doc__ or "")
        return 2
    found = labelled(argv[0], argv[1])
    if not found:
        sys.stderr.write(f"no command under {argv[1]!r} in {argv[0]}\n")
        return 1
    sys.stdout.write("".join(f"{text}\n" for text in found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
