"""The other end of the port: which profiles of a browser have the Pedelec extension,
under which id, enabled or not, and whether the host lets that id in.

Read only, with the host's one safe reader (`files.read_trusted`) and a bound on every
file, every profile and every extension looked into; what the files hold is parsed by
`profile_prefs` (pure). A file that is missing, refused, huge or not JSON becomes a line
of the report, never an exception, and nothing in a profile is ever written.

An extension is Pedelec when its id is the official one, or when it asks for
`nativeMessaging` and its files name this host (`"cc.isaaclin.pedelec"`, as the
background scripts of the extension's 0.1.23 and 0.4.6 releases do): an unpacked,
self-built or other-store copy has another id, and Chrome refuses it ("Access to the
specified native messaging host is forbidden.") unless the manifest lists that id.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID, files
from native_host.install import locations
from native_host.install.doctor import profile_prefs as prefs
from native_host.install.doctor.manifests import ManifestContext
from native_host.install.doctor.report import EXITED, FORBIDDEN, Finding, Status
from native_host.install.locations import Os

MAX_PREFS_BYTES = 16 * 1_048_576
"""Preferences of a heavily used profile run to a few MiB; past this doctor says so."""
MAX_MANIFEST_BYTES = 1_048_576
MAX_SCRIPT_BYTES = 8 * 1_048_576
MAX_PROFILES = 32
"""Profiles read per browser; the rest are counted, not read."""
MAX_CANDIDATES = 16
"""Extensions asking for nativeMessaging looked into per profile."""
MAX_SCRIPTS = 200
MAX_SCRIPT_TOTAL_BYTES = 32 * 1_048_576
MAX_DIR_ENTRIES = 4096
MAX_DEPTH = 4
MAX_LISTED = 8
"""Profiles named in one line; more are counted."""
NATIVE_MESSAGING = "nativeMessaging"
STORE_PAGE = f"https://chromewebstore.google.com/detail/{OFFICIAL_EXTENSION_ID}"
NO_EXTENSION = "pages find no Pedelec extension, so nothing reaches the host"
UNREAD_HINT = "open {page} in that profile to see whether Pedelec is there (doctor cannot tell)"

EXTENSIONS_PAGES = {"edge": "edge://extensions", "brave": "brave://extensions",
                    "vivaldi": "vivaldi://extensions", "opera": "opera://extensions"}  # fmt: skip
"""Each browser family's own extensions page; the others (and profile roots) use Chrome's."""
CHROME_EXTENSIONS_PAGE = "chrome://extensions"


def extensions_page(browser: str | None) -> str:
    """Where the user turns an extension on: `chrome://extensions` or its brand's own."""
    return EXTENSIONS_PAGES.get(browser or "", CHROME_EXTENSIONS_PAGE)


@dataclass(frozen=True)
class PedelecCopy:
    """A Pedelec extension installed in one profile."""

    profile: prefs.ProfileEntry
    record: prefs.ExtensionRecord
    facts: prefs.ManifestFacts | None

    def describe(self) -> str:
        """`Pedelec 0.4.6 <id> (Chrome Web Store)`, or `(unpacked from <dir>)`."""
        facts = self.facts
        named = " ".join(p for p in (facts.name, facts.version) if p) if facts else ""
        where = prefs.source(self.record, facts)
        return f"{named + ' ' if named else ''}{self.record.extension_id} ({where})"


@dataclass
class ProfileScan:
    """What one profile's files say: the Pedelec copies, and what could not be read."""

    profile: prefs.ProfileEntry
    copies: list[PedelecCopy] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    """Extensions asking for nativeMessaging whose files could not be read, and why."""
    read: bool = False
    """Whether its preferences files were read whole (none refused or broken)."""

    def all_problems(self) -> list[str]:
        """What could not be read, one sentence per file, one for all undecided ones."""
        undecided = self.undecided
        if len(undecided) > 1:
            undecided = [
                f"{len(undecided)} extensions asking for {NATIVE_MESSAGING} could not be "
                f"looked into, so doctor cannot tell whether they are Pedelec; the first: "
                f"{undecided[0]}"
            ]
        elif undecided:
            undecided = [f"doctor cannot tell whether it is Pedelec: {undecided[0]}"]
        return self.problems + undecided


# --- reading -----------------------------------------------------------------------------
def _read(path: Path, limit: int) -> bytes | files.FileRefusedError:
    """The file's bytes through the trusted reader, or why they were not read."""
    try:
        return files.read_trusted(path, limit)
    except files.FileRefusedError as exc:
        return exc


def _missing(outcome: bytes | files.FileRefusedError) -> bool:
    return isinstance(outcome, files.FileRefusedError) and outcome.reason == files.MISSING


def read_profiles(user_data_dir: Path) -> tuple[list[prefs.ProfileEntry], str]:
    """The profiles of a user data dir, from `Local State`; when it is missing or
    unusable, the profile directories found (`Default`, `Profile N`), and why."""
    path = user_data_dir / prefs.LOCAL_STATE
    outcome = _read(path, MAX_PREFS_BYTES)
    if isinstance(outcome, files.FileRefusedError):
        return _profile_directories(user_data_dir), outcome.explanation
    try:
        listed = prefs.profiles_from_local_state(prefs.parse_document(outcome))
    except prefs.ProfileFileError as exc:
        return _profile_directories(user_data_dir), f"{path}: {exc}"
    if not listed:
        return _profile_directories(user_data_dir), f"{path} lists no profile"
    return listed, ""


def _profile_directories(user_data_dir: Path) -> list[prefs.ProfileEntry]:
    """`Default` and `Profile N` directories, the names Chromium gives new profiles."""
    try:
        with os.scandir(user_data_dir) as entries:
            names = [e.name for _, e in zip(range(MAX_DIR_ENTRIES), entries, strict=False)]
    except OSError:
        return []
    wanted = [n for n in names if n == prefs.DEFAULT_PROFILE or prefs.NUMBERED_PROFILE.match(n)]
    return [prefs.ProfileEntry(n) for n in sorted(wanted) if (user_data_dir / n).is_dir()]


def _relative_parts(relative: str) -> tuple[str, ...] | None:
    """The parts of a path recorded relative to a directory (with `/` or `\\`), or None
    when it is absolute or climbs out (`..`): then it is not where the files are."""
    for flavour in (PureWindowsPath, PurePosixPath):
        pure = flavour(relative)
        if pure.is_absolute() or pure.anchor or ".." in pure.parts:
            return None
    parts = (PureWindowsPath if "\\" in relative else PurePosixPath)(relative).parts
    return tuple(parts) or None


def extension_directory(profile_dir: Path, record: prefs.ExtensionRecord) -> Path | None:
    """Where the extension's files are: its recorded path when absolute (unpacked), else
    under the profile's `Extensions` directory; None for a path that leaves it."""
    if Path(record.path).is_absolute():
        return Path(record.path)
    parts = _relative_parts(record.path)
    return profile_dir.joinpath(prefs.EXTENSIONS_DIR, *parts) if parts else None


def _disk_manifest(directory: Path) -> prefs.ManifestFacts | str:
    """The facts of the extension's own manifest.json, or why it could not be read."""
    path = directory / prefs.MANIFEST_JSON
    outcome = _read(path, MAX_MANIFEST_BYTES)
    if isinstance(outcome, files.FileRefusedError):
        return outcome.explanation
    try:
        return prefs.parse_manifest(outcome)
    except prefs.ProfileFileError as exc:
        return f"{path}: {exc}"


def _scripts(directory: Path, facts: prefs.ManifestFacts | None) -> Iterator[tuple[Path, bool]]:
    """The background scripts the manifest names (True), then every other script in the
    extension's directory (a bundler may put the host name in a chunk), bounded; no
    symbolic link is followed."""
    named = [] if facts is None else [_relative_parts(s) for s in facts.scripts]
    first = [directory.joinpath(*parts) for parts in named if parts]
    yield from ((path, True) for path in first)
    pending, visited = [(directory, 0)], 0
    while pending and visited < MAX_DIR_ENTRIES:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = sorted(
                    (e.name, e.is_dir(follow_symlinks=False))
                    for _, e in zip(range(MAX_DIR_ENTRIES - visited), entries, strict=False)
                )
        except OSError:
            continue
        visited += len(listed)
        for name, is_dir in listed:
            path = folder / name
            if is_dir and depth < MAX_DEPTH:
                pending.append((path, depth + 1))
            elif not is_dir and name.endswith((".js", ".mjs")) and path not in first:
                yield path, False


def _names_this_host(directory: Path, facts: prefs.ManifestFacts | None) -> bool | str:
    """Whether one of the extension's scripts names this host; or, when none does and
    its folder, or a script it names, could not be read, why."""
    if not directory.is_dir():
        return f"its folder {directory} does not exist"
    total, refused = 0, ""
    for count, (path, named) in enumerate(_scripts(directory, facts)):
        if count >= MAX_SCRIPTS or total >= MAX_SCRIPT_TOTAL_BYTES:
            break
        outcome = _read(path, MAX_SCRIPT_BYTES)
        if isinstance(outcome, files.FileRefusedError):
            if named or not _missing(outcome):
                refused = refused or outcome.explanation
            continue
        total += len(outcome)
        if prefs.names_host(outcome, HOST_NAME):
            return True
    return refused or False


def might_be_pedelec(record: prefs.ExtensionRecord) -> bool:
    """Worth reading its files: the official id, or one that asks for nativeMessaging (or
    whose entry records no permissions, so that only its manifest.json can tell)."""
    if record.extension_id == OFFICIAL_EXTENSION_ID:
        return True
    recorded = record.recorded_permissions()
    return recorded is None or NATIVE_MESSAGING in recorded


def _identify(
    profile: prefs.ProfileEntry, profile_dir: Path, record: prefs.ExtensionRecord
) -> PedelecCopy | str | None:
    """A Pedelec copy (the official id, or nativeMessaging and a script naming this
    host); a sentence when a nativeMessaging extension's files could not be read; None
    for any other extension."""
    directory = extension_directory(profile_dir, record)
    facts = prefs.manifest_facts(record.manifest) if record.manifest is not None else None
    why = (
        ""
        if directory
        else f"its recorded path {prefs.printable(record.path, 200)!r} leaves the profile"
    )
    if facts is None and directory is not None:
        read = _disk_manifest(directory)
        facts, why = (read, "") if isinstance(read, prefs.ManifestFacts) else (None, read)
    if record.extension_id == OFFICIAL_EXTENSION_ID:
        return PedelecCopy(profile, record, facts)
    permissions = (record.recorded_permissions() or frozenset()) | (
        facts.permissions if facts else frozenset()
    )
    if NATIVE_MESSAGING not in permissions:
        return None
    if directory is not None and not why:
        found = _names_this_host(directory, facts)
        if found is True:
            return PedelecCopy(profile, record, facts)
        why = found or ""
    if not why:
        return None
    named = f"{facts.name} " if facts and facts.name else ""
    return f"{named}{record.extension_id} asks for {NATIVE_MESSAGING}, but {why}"


def scan_profile(user_data_dir: Path, profile: prefs.ProfileEntry, os_name: Os) -> ProfileScan:
    """The Pedelec copies one profile records, from both preferences files."""
    scan = ProfileScan(profile)
    profile_dir = user_data_dir / profile.directory
    by_file: list[dict[str, prefs.ExtensionRecord]] = []
    names = prefs.SETTINGS_FILES[os_name]
    outcomes = [(profile_dir / name, _read(profile_dir / name, MAX_PREFS_BYTES)) for name in names]
    for path, outcome in outcomes:
        if isinstance(outcome, files.FileRefusedError):
            if not _missing(outcome):
                scan.problems.append(outcome.explanation)
            continue
        try:
            by_file.append(prefs.extension_records(prefs.parse_document(outcome)))
        except prefs.ProfileFileError as exc:
            scan.problems.append(f"{path}: {exc}")
    if all(_missing(outcome) for _, outcome in outcomes):
        scan.problems.append(f"{profile_dir} has no {prefs.PREFERENCES} (deleted, or never opened)")
    scan.read = not scan.problems
    candidates = [r for r in prefs.merge_records(by_file).values() if might_be_pedelec(r)]
    for record in candidates[:MAX_CANDIDATES]:
        found = _identify(profile, profile_dir, record)
        if isinstance(found, PedelecCopy):
            scan.copies.append(found)
        elif found:
            scan.undecided.append(found)
    if len(candidates) > MAX_CANDIDATES:
        scan.problems.append(
            f"{len(candidates) - MAX_CANDIDATES} more extensions asking for {NATIVE_MESSAGING} "
            f"were not looked into (doctor looks into {MAX_CANDIDATES} per profile)"
        )
    return scan


# --- judging -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Subject:
    """The browser (or profile root) the findings are about, and how to fix its registration."""

    name: str
    user_data_dir: Path
    os: Os
    install_hint: str
    """The `pedelec-native-host install ...` command that registers this browser."""
    page: str = CHROME_EXTENSIONS_PAGE


def _labels(profiles: Sequence[prefs.ProfileEntry]) -> str:
    shown = ", ".join(p.label for p in profiles[:MAX_LISTED])
    more = len(profiles) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def _copy_finding(subject: Subject, copy: PedelecCopy, ctx: ManifestContext | None) -> Finding:
    """One line per copy: what it is, whether it runs, whether the host lets it in."""
    record = copy.record
    head = f"profile {copy.profile.label}: {copy.describe()}"
    origins = ctx.origins if ctx is not None else []
    listed = locations.extension_origin(record.extension_id) in origins
    configured = ctx is not None and record.extension_id in ctx.config_ids
    official = record.extension_id == OFFICIAL_EXTENSION_ID
    refused, symptom = "", ""
    if not official and not listed:
        refused = "allowed_origins does not list it" + (" (config.json does)" if configured else "")
        symptom = FORBIDDEN
    elif not official and not configured:
        refused = "config.json does not allow it (allowed_origins does)"
        symptom = f"{EXITED} (the host refuses it: ORIGIN_NOT_APPROVED)"
    allow_fix = f"run `{subject.install_hint} --extension-id {record.extension_id}`"
    if not record.enabled:
        reasons = prefs.disable_reasons(record.disable_reasons)
        words = "; ".join(r.words for r in reasons)
        fixes = list(dict.fromkeys(r.fix.format(page=subject.page) for r in reasons))
        detail = f"{head}, disabled: {words}" + (f"; and {refused}" if refused else "")
        hint = "; ".join(fixes + ([f"then {allow_fix}"] if refused else []))
        return Finding(
            Status.WARN, subject.name, "extension", detail, hint, "it does not run in that profile"
        )
    if refused:
        detail = f"{head}, enabled, but {refused}"
        return Finding(
            Status.FAIL, subject.name, "extension", detail, allow_fix, symptom, "extension-refused"
        )
    allowed = "" if official else "; allowed_origins and config.json allow it"
    return Finding(Status.OK, subject.name, "extension", f"{head}, enabled{allowed}")


def extension_findings(subject: Subject, ctx: ManifestContext | None) -> list[Finding]:
    """The profiles, each Pedelec copy in them, copies that compete, and none at all.

    `ctx` is the manifest the browser would load (None when there is none to judge ids
    by: then no other id is allowed)."""
    if not subject.user_data_dir.is_dir():
        return []
    profiles, why = read_profiles(subject.user_data_dir)
    findings: list[Finding] = []
    if not profiles:
        detail = f"none in {subject.user_data_dir}" + (f" ({why})" if why else "")
        hint = "start the browser once with this user data dir, then install the extension"
        return [
            Finding(
                Status.WARN, subject.name, "profiles", detail, hint, NO_EXTENSION, "never-started"
            )
        ]
    read, skipped = profiles[:MAX_PROFILES], profiles[MAX_PROFILES:]
    counted = (
        f"{len(profiles)} ({len(read)} read, at most {MAX_PROFILES})"
        if skipped
        else str(len(profiles))
    )
    if why:
        directories = "directory" if len(profiles) == 1 else "directories"
        detail = f"{why}; found {counted} profile {directories}: {_labels(read)}"
        hint = "the browser rewrites Local State when it runs; start it once"
        findings.append(Finding(Status.WARN, subject.name, "profiles", detail, hint))
    else:
        detail = f"{counted} in Local State: {_labels(read)}"
        findings.append(Finding(Status.OK, subject.name, "profiles", detail))
    scans = [scan_profile(subject.user_data_dir, p, subject.os) for p in read]
    for scan in scans:
        findings.extend(_copy_finding(subject, copy, ctx) for copy in scan.copies)
        for problem in scan.all_problems():
            findings.append(
                Finding(
                    Status.WARN,
                    subject.name,
                    "profile files",
                    f"profile {scan.profile.label}: {problem}",
                    UNREAD_HINT.format(page=subject.page),
                )
            )
        running = [c for c in scan.copies if c.record.enabled]
        if len(running) > 1:
            ids = ", ".join(c.describe() for c in running)
            detail = (
                f"profile {scan.profile.label}: {len(running)} Pedelec extensions enabled: {ids}"
            )
            findings.append(
                Finding(
                    Status.WARN,
                    subject.name,
                    "extension copies",
                    detail,
                    f"keep one: turn the others off at {subject.page} in that profile",
                    "each opens its own connection, and a page may talk to either",
                )
            )
    looked = [scan.profile for scan in scans if scan.read]
    if looked and not any(scan.copies for scan in scans):
        where = "its profile" if len(looked) == 1 else f"its {len(looked)} profiles"
        findings.append(
            Finding(
                Status.WARN,
                subject.name,
                "extension",
                f"no Pedelec extension in {where} read: {_labels(looked)}",
                f"install it from {STORE_PAGE} in the profile you use",
                NO_EXTENSION,
                "no-extension",
            )
        )
    return findings


def row_subject(row: locations.BrowserRow, user_data_dir: Path, install_hint: str) -> Subject:
    """The subject of an installed browser: its user data dir and its extensions page."""
    return Subject(row.name, user_data_dir, row.os, install_hint, extensions_page(row.browser))
