"""Every citation of the protocol resolves in docs/protocol.md.

Code, tests, docs and golden fixtures cite the protocol as "spec 7.5", "§9.3",
"spec 1.4 step 4", "spec 0.3 rule 7", "spec 7.11 a", "spec 9.8 items 4 - 5",
"spec 8 #22", "spec 9.9 C4 b", ranges such as "spec 7.7-7.10", or a bare "(7.11 b)".
A citation of a section, step, rule, item, lettered part, exchange or case that the
document does not have sends a newcomer nowhere, so it fails here with its file and
line. The document's own cross-references are held to the same rule.
"""

from __future__ import annotations

import io
import json
import os
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = ROOT / "docs" / "protocol.md"
FIXTURES = ROOT / "tests" / "fixtures" / "golden"
SCANNED_SUFFIXES = frozenset({".py", ".md", ".sh", ".ps1", ".js"})
PRUNED_DIRS = frozenset({"build", "dist", "node_modules", "__pycache__", "results"})
SELF = Path(__file__).resolve()
"""Skipped by the scan: its parser tests hold sample citations, some deliberately wrong."""
MIN_CITATIONS = 100
"""The code cites the protocol far more often than this; finding fewer means the scan broke."""

# --- the citation grammar ------------------------------------------------------------
_NUMBER = r"\d(?:\.\d{1,2})?(?!\d|\.\d)"
"""A section, `7` or `7.10`, and never a piece of a version such as 0.1.23."""
_SECTION = re.compile(rf"§?\s*({_NUMBER})")
_RANGE = re.compile(rf"\s*[-\u2013]\s*§?\s*({_NUMBER})")
_NUMBERED = re.compile(
    r"\s+(step|rule|item)s?\s+(\d+(?:\s*(?:-|\u2013|,|\band\b)\s*\d+)*)(?!\d|\.\d)"
)
_PAREN_LETTERS = re.compile(r"\s*\(([a-d](?:\s*,\s*[a-d])*)\)")
_BARE_LETTERS = re.compile(r"\s+([a-d](?:\s*,\s*[a-d])*)(?=[),:;]|\Z)")
_LABEL = re.compile(r"\s*(#\d+|C\d+)\b")
"""An exchange of section 8 (`#22`) or a case of section 9.9 (`C4`)."""
_SEPARATOR = re.compile(r"\s*(?:,|/|\band\b)\s*(?:(?i:spec)\s+)?")
_TRIGGER = re.compile(
    r"(?i:\bspec(?:ification)?\b)\s+(?:(?i:sections?)\s+)?(?=§|\d)"
    r"|(?i:\bsections?)\s+(?=\d)"
    r"|§(?=\s*\d)"
    r"|(?P<paren>(?<![\w.])\()(?=\d\.\d)"
    r"|(?<![\w.])(?=\d\.\d{1,2}\s+(?:step|rule|item)s?\s+\d)"
)
"""Where a citation starts: "spec"/"section(s)", "§", "(" before a subsection number,
or a subsection number followed by a step, rule or item."""
_ARROW = re.compile(rf"→\s*§?({_NUMBER})")
_HEADING = re.compile(r"^(#{2,6}) ", re.MULTILINE)
_NUMBERED_HEADING = re.compile(r"^(#{2,3}) (\d(?:\.\d{1,2})?)\.? ", re.MULTILINE)
_FIXTURE_NAME = re.compile(r"\b0[89]_[a-z0-9_]+\.json\b")


@dataclass(frozen=True)
class Citation:
    """One cited target: a section, optionally narrowed to one of its parts."""

    where: str
    section: str
    part: str | None = None
    """`step 4`, `rule 7`, `item 6`, `(a)`, `#22`, `C4` or `C4 (b)`."""

    def __str__(self) -> str:
        target = self.section if self.part is None else f"{self.section} {self.part}"
        return f"{self.where}: {target}"


def _expand_range(first: str, last: str) -> list[str]:
    """`7.7`-`7.10` is 7.7, 7.8, 7.9 and 7.10; anything else cites both ends."""
    major_a, _, minor_a = first.partition(".")
    major_b, _, minor_b = last.partition(".")
    if major_a == major_b and minor_a and minor_b and int(minor_a) <= int(minor_b):
        return [f"{major_a}.{n}" for n in range(int(minor_a), int(minor_b) + 1)]
    if not minor_a and not minor_b and int(major_a) <= int(major_b):
        return [str(n) for n in range(int(major_a), int(major_b) + 1)]
    return [first, last]


def _numbers(text: str) -> list[int]:
    """`2-3 and 5` is 2, 3 and 5."""
    found: list[int] = []
    for chunk in re.split(r"\s*(?:,|\band\b)\s*", text):
        low, _, high = re.sub(r"\s*[-\u2013]\s*", "-", chunk).partition("-")
        found.extend(range(int(low), int(high or low) + 1))
    return found


def _letters(text: str, at: int) -> tuple[list[str], int]:
    match = _PAREN_LETTERS.match(text, at) or _BARE_LETTERS.match(text, at)
    if match is None:
        return [], at
    return re.findall(r"[a-d]", match.group(1)), match.end()


def _parts(text: str, at: int, section: str, where: str, cited: list[Citation]) -> int:
    """Parts following a section: steps, rules, items, labels and letters."""
    while True:
        numbered = _NUMBERED.match(text, at)
        if numbered is not None:
            kind = numbered.group(1)
            cited.extend(
                Citation(where, section, f"{kind} {n}") for n in _numbers(numbered.group(2))
            )
            at = numbered.end()
            continue
        label = _LABEL.match(text, at)
        if label is not None:
            at = _label(text, label, section, where, cited)
            continue
        letters, at_after = _letters(text, at)
        if letters:
            cited.extend(Citation(where, section, f"({letter})") for letter in letters)
            at = at_after
            continue
        return at


def _label(text: str, label: re.Match[str], section: str, where: str, cited: list[Citation]) -> int:
    """`#22`, or `C4` with optional letters (`C4 b`: part (b) of case C4)."""
    letters, at = _letters(text, label.end())
    name = label.group(1)
    if letters:
        cited.extend(Citation(where, section, f"{name} ({letter})") for letter in letters)
    else:
        cited.append(Citation(where, section, name))
    return at


def parse_list(
    text: str, pos: int, where: str, current: str | None = None
) -> tuple[list[Citation], int]:
    """Parse the citation list at `pos` ("7.2, 7.8", "1.4 step 4 / 7.11 (b, c)",
    "9.9 C7, C1"); a bare label continues the `current` section. Returns the
    citations and the position after them."""
    cited: list[Citation] = []
    at = pos
    while True:
        section = _SECTION.match(text, at)
        label = None if section is not None or current is None else _LABEL.match(text, at)
        if section is not None:
            first = section.group(1)
            at = section.end()
            ranged = _RANGE.match(text, at)
            sections = [first] if ranged is None else _expand_range(first, ranged.group(1))
            at = at if ranged is None else ranged.end()
            cited.extend(Citation(where, s) for s in sections)
            current = sections[-1]
        elif label is not None and current is not None:
            at = _label(text, label, current, where, cited)
        else:
            return cited, at
        at = _parts(text, at, current, where, cited)
        separator = _SEPARATOR.match(text, at)
        if separator is None:
            return cited, at
        following = separator.end()
        if _SECTION.match(text, following) is None and _LABEL.match(text, following) is None:
            return cited, at
        at = following


def citations_in(text: str, name: str) -> list[Citation]:
    """Every citation in a file's text, each with `name:line`."""
    found: list[Citation] = []
    end = 0
    for trigger in _TRIGGER.finditer(text):
        if trigger.start() < end:
            continue
        where = f"{name}:{text.count(chr(10), 0, trigger.start()) + 1}"
        cited, stop = parse_list(text, trigger.end(), where)
        if trigger.group("paren") is not None and re.match(r"\s*\)", text[stop:]) is None:
            continue  # "(1.5 s)" is a duration, not a citation
        if cited:
            found.extend(cited)
            end = stop
    return found


def fixture_citations(spec: str, name: str) -> list[Citation]:
    """A fixture's `spec` field, e.g. "8 #21 timeout variant, 7.3" or "9.9 C7, C1, C2".
    Every comma-separated piece must cite something."""
    found: list[Citation] = []
    current: str | None = None
    for piece in spec.split(","):
        cited, _ = parse_list(piece.strip(), 0, f"{name} spec", current)
        if not cited:
            found.append(Citation(f"{name} spec", f"unparsable {piece.strip()!r}"))
            continue
        found.extend(cited)
        current = cited[-1].section
    return found


# --- the document ----------------------------------------------------------------------
def section_bodies(text: str) -> dict[str, str]:
    """Each numbered section's text, up to the next heading of its level or above."""
    headings = list(_HEADING.finditer(text))
    bodies: dict[str, str] = {}
    for numbered in _NUMBERED_HEADING.finditer(text):
        level = len(numbered.group(1))
        end = next(
            (
                h.start()
                for h in headings
                if h.start() > numbered.start() and len(h.group(1)) <= level
            ),
            len(text),
        )
        bodies[numbered.group(2)] = text[numbered.end() : end]
    return bodies


def _has_part(section: str, part: str, body: str) -> bool:
    """Steps, rules and items are numbered list items at the margin; exchanges and cases
    are table rows of §8 and §9.9; lettered parts start a line with `(a)` or `**(a)`."""
    kind, _, rest = part.partition(" ")
    if kind in ("step", "rule", "item"):
        return re.search(rf"^{rest}\. ", body, re.MULTILINE) is not None
    if kind.startswith("#"):
        return section == "8" and re.search(rf"^\| {kind} \|", body, re.MULTILINE) is not None
    if kind.startswith("C"):
        row = re.search(rf"^\| {kind} \|.*$", body, re.MULTILINE) if section == "9.9" else None
        return row is not None and rest in row.group(0)
    return re.search(rf"^(?:[-*] )?(?:\*\*)?{re.escape(kind)}", body, re.MULTILINE) is not None


def unresolved(citations: list[Citation], bodies: dict[str, str]) -> list[str]:
    """The citations the document cannot answer, as `file:line: target`."""
    missing: list[str] = []
    for citation in citations:
        body = bodies.get(citation.section)
        if body is None or (
            citation.part is not None and not _has_part(citation.section, citation.part, body)
        ):
            missing.append(str(citation))
    return sorted(set(missing))


def scanned_files() -> Iterator[Path]:
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = sorted(
            d
            for d in subdirectories
            if not d.startswith(".") and d not in PRUNED_DIRS and not d.endswith(".egg-info")
        )
        for file in sorted(files):
            path = Path(directory, file)
            if path.suffix in SCANNED_SUFFIXES and path.resolve() != SELF:
                yield path


def prose_of_python(source: str) -> str:
    """Only the comments and string literals of a Python file, everything else blanked
    (line numbers kept): citations live there, and code such as `(0.5, 1)` is not one."""
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    kept = [c if c == "\n" else " " for c in source]
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                start = line_starts[token.start[0] - 1] + token.start[1]
                end = line_starts[token.end[0] - 1] + token.end[1]
                kept[start:end] = source[start:end]
    except (tokenize.TokenError, SyntaxError):
        return source  # a file mid-edit: read all of it rather than none
    return "".join(kept)


def repository_citations() -> list[Citation]:
    found: list[Citation] = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            text = prose_of_python(text)
        found.extend(citations_in(text, str(path.relative_to(ROOT))))
    return found


@pytest.fixture(scope="module")
def bodies() -> dict[str, str]:
    return section_bodies(PROTOCOL.read_text(encoding="utf-8"))


# --- the repository ------------------------------------------------------------------------
def test_every_citation_in_the_repository_resolves(bodies: dict[str, str]) -> None:
    citations = repository_citations()
    assert len(citations) >= MIN_CITATIONS, f"only {len(citations)} citations found"
    missing = unresolved(citations, bodies)
    assert not missing, "cited, but not in docs/protocol.md:\n" + "\n".join(missing)


def test_every_golden_fixture_names_what_it_proves(bodies: dict[str, str]) -> None:
    """A fixture's `spec` field points at its exchange (§8, §9.9) and the rules it proves."""
    citations: list[Citation] = []
    for path in sorted(FIXTURES.glob("*.json")):
        fixture = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(fixture.get("spec"), str), f"{path.name} has no spec field"
        citations.extend(fixture_citations(fixture["spec"], path.name))
    assert citations
    missing = unresolved(citations, bodies)
    assert not missing, "cited, but not in docs/protocol.md:\n" + "\n".join(missing)


def test_the_fixtures_the_document_names_exist() -> None:
    names = set(_FIXTURE_NAME.findall(PROTOCOL.read_text(encoding="utf-8")))
    assert len(names) > 50
    assert sorted(n for n in names if not (FIXTURES / n).is_file()) == []


# --- the document itself ---------------------------------------------------------------------
def test_the_documents_own_references_resolve(bodies: dict[str, str]) -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    arrows = [
        Citation(f"docs/protocol.md:{text.count(chr(10), 0, m.start()) + 1}", m.group(1))
        for m in _ARROW.finditer(text)
    ]
    own = citations_in(text, "docs/protocol.md") + arrows
    assert len(own) > 100
    missing = unresolved(own, bodies)
    assert not missing, "dangling references:\n" + "\n".join(missing)


def test_sections_are_numbered_0_to_9_without_gaps(bodies: dict[str, str]) -> None:
    """The numbering is the shared specification's, so code citing either means the same."""
    top = [s for s in bodies if "." not in s]
    assert top == [str(n) for n in range(10)]
    for major in top:
        minors = [int(s.split(".")[1]) for s in bodies if s.startswith(f"{major}.")]
        assert minors == list(range(1, len(minors) + 1)), f"section {major}: {minors}"
    assert "8" in bodies and not any(s.startswith("8.") for s in bodies)


# --- the parser (sample text, not repository citations) ------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(spec 7.5).", ["7.5"]),
        ("spec 1.2, 7.6, 7.7, 7.12).", ["1.2", "7.6", "7.7", "7.12"]),
        ("(spec 7.7-7.10, 9.3)", ["7.7", "7.8", "7.9", "7.10", "9.3"]),
        ("§7.7\u2013§7.9 and §9.3", ["7.7", "7.8", "7.9", "9.3"]),
        ("spec 1.4 steps 2-3 and 5 (the", ["1.4", "1.4 step 2", "1.4 step 3", "1.4 step 5"]),
        ("(spec 1.4 step 4 / 7.11 (b, c))", ["1.4", "1.4 step 4", "7.11", "7.11 (b)", "7.11 (c)"]),
        ("(spec 7.11 c, d): mode", ["7.11", "7.11 (c)", "7.11 (d)"]),
        ("(spec 0.3\n    rules 6 and 7).", ["0.3", "0.3 rule 6", "0.3 rule 7"]),
        ("(spec 8 #23, 9.9 C9)", ["8", "8 #23", "9.9", "9.9 C9"]),
        ("(§9.9 C4 b) |", ["9.9", "9.9 C4 (b)"]),
        (
            "spec 3.6 - 3.9, 9.8 items 4 - 5",
            ["3.6", "3.7", "3.8", "3.9", "9.8", "9.8 item 4", "9.8 item 5"],
        ),
        ("(spec section 3)", ["3"]),
        ("(sections 8 and 9.9)", ["8", "9.9"]),
        ("(spec 1, 7).", ["1", "7"]),
        ("spec `PROTOCOL.md` §7.11", ["7.11"]),
        ("authorisation (3.7).", ["3.7"]),
        ("# --- argv (7.11 a) ---", ["7.11", "7.11 (a)"]),
        ("injected (7.14 step 6).", ["7.14", "7.14 step 6"]),
        ("modules, 9.8 item 7).", ["9.8", "9.8 item 7"]),
        ("(spec 3.1, issue 2)", ["3.1"]),
        ("(spec 4, 7.14; issue 4)", ["4", "7.14"]),
        ("Pedelec 0.1.23 (0.4.0) and wait(0.5) and (1.5 s) and the .spec file", []),
        ("spec = tools.get(name)", []),
        ("no replay of created (1) and status_changed idle (2)", []),
    ],
)
def test_the_parser_reads_each_citation_form(text: str, expected: list[str]) -> None:
    found = [
        c.section if c.part is None else f"{c.section} {c.part}" for c in citations_in(text, "x")
    ]
    assert found == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("8 #21 timeout variant, 7.3", ["8", "8 #21", "7.3"]),
        ("9.9 C7, C1, C2", ["9.9", "9.9 C7", "9.9 C1", "9.9 C2"]),
        ("9.9 C4 a", ["9.9", "9.9 C4 (a)"]),
        ("7.11 a, 7.16", ["7.11", "7.11 (a)", "7.16"]),
    ],
)
def test_the_parser_reads_fixture_spec_fields(spec: str, expected: list[str]) -> None:
    found = [
        c.section if c.part is None else f"{c.section} {c.part}"
        for c in fixture_citations(spec, "f")
    ]
    assert found == expected


@pytest.mark.parametrize(
    "bad",
    [
        "(spec 7.17)",
        "(spec 9.10)",
        "(spec 7.14 step 9)",
        "(spec 0.3 rule 10)",
        "(spec 7.10 a)",
        "(spec 8 #27)",
        "(spec 7.5 #3)",
        "(spec 9.9 C13)",
        "(spec 9.9 C5 b)",
        "(spec 7.6-7.18)",
    ],
)
def test_a_citation_of_a_missing_part_is_reported(bad: str, bodies: dict[str, str]) -> None:
    citations = citations_in(f"x = 1\n# {bad}\n", "sample.py")
    assert citations
    missing = unresolved(citations, bodies)
    assert missing and all(m.startswith("sample.py:2: ") for m in missing)


def test_only_the_comments_and_strings_of_python_are_read() -> None:
    source = 'limits = (0.5, 1.5)\n# the cap (7.7)\nx = f(3.1)  # and (spec 9.4)\n"""(7.13)"""\n'
    found = [str(c) for c in citations_in(prose_of_python(source), "m.py")]
    assert found == ["m.py:2: 7.7", "m.py:3: 9.4", "m.py:4: 7.13"]


def test_an_unparsable_fixture_spec_is_reported(bodies: dict[str, str]) -> None:
    assert unresolved(fixture_citations("8 #3, variant", "f.json"), bodies) == [
        "f.json spec: unparsable 'variant'"
    ]
