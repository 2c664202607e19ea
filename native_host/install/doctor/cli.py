"""`pedelec-native-host doctor`: run every check for this machine and print the report.

Which browsers: the ones named, else every installed one plus everything the install
record says was registered (profile roots included). Every check runs isolated: one
that fails unexpectedly becomes a finding, the report always prints, no traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PureWindowsPath
from typing import TextIO

from native_host.install import locations, programs
from native_host.install.cli import USAGE_ERROR, add_user_data_dir_option, browser_names
from native_host.install.doctor import (
    bug_report,
    core_side,
    extensions,
    manifests,
    running,
    sandbox,
    selftest,
)
from native_host.install.doctor.browser_policy import policy_findings, read_policy, system_install
from native_host.install.doctor.report import NOT_FOUND, Finding, Status, exit_status
from native_host.install.doctor.verdict import render
from native_host.install.locations import BrowserRow, Os, Sandbox, Scope, Target
from native_host.install.managed_policy import Permission, PolicyReader, PolicyRegistry
from native_host.install.plan import as_local
from native_host.install.record import (
    MANIFEST,
    START_IMAGE,
    InstallRecord,
    RecordError,
    load_record,
    record_path,
)
from native_host.install.registry import Registry, WindowsRegistry
from native_host.usage import Parser, existing_parent, seconds

DEFAULT_TIMEOUT_S = 15.0
FIX_AGAIN = "run `pedelec-native-host install` again"
PROFILE = "profile"
"""The `browsers` word the install record uses for a `--user-data-dir` profile root."""


def _install_hint(row: BrowserRow) -> str:
    """The command that registers this browser (a Flatpak also needs --flatpak)."""
    flag = " --flatpak" if row.sandbox is Sandbox.FLATPAK else ""
    return f"pedelec-native-host install{flag} --browser {row.name}"


def _profile_hint(directory: Path) -> str:
    """The command that registers a `--user-data-dir` profile root."""
    return f"pedelec-native-host install --user-data-dir {directory}"


@dataclass
class Doctor:
    """Runs every check for one environment; `findings` is the report."""

    platform: str
    env: Mapping[str, str]
    home: PurePath
    timeout: float = DEFAULT_TIMEOUT_S
    registry_factory: Callable[[], Registry] = WindowsRegistry
    policy_registry_factory: Callable[[], PolicyRegistry] | None = None
    system_root: Path = Path("/")
    """Prefix of system paths (`/etc`, `/Library`): tests simulate a machine there."""
    findings: list[Finding] = field(default_factory=list)
    record: InstallRecord | None = None
    bundle: Path | None = None
    """The frozen bundle's executable when doctor runs from one (the MSI's): a browser
    registered with it starts this very host."""
    _self_tests: dict[str, list[Finding]] = field(default_factory=dict)
    _version_checks: dict[str, list[Finding]] = field(default_factory=dict)
    _loaded: dict[str, manifests.ManifestContext] = field(default_factory=dict)
    """The manifest each subject's browser loads, until its extension check (which judges
    ids by it) takes it."""
    seen: list[bug_report.Seen] = field(default_factory=list)
    """Each registration followed and the manifest it names (`doctor --report`)."""

    @property
    def os(self) -> Os:
        return locations.normalize_platform(self.platform)

    def add(self, *findings: Finding) -> None:
        self.findings.extend(findings)

    def isolated(self, subject: str, check: str, run: Callable[[], None]) -> None:
        """Run one check; anything unexpected becomes a finding instead of a traceback."""
        try:
            run()
        except Exception as exc:  # the safety net of a diagnostic tool
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    check,
                    f"doctor could not finish this check: {type(exc).__name__}: {exc}",
                    "report it with the file "
                    "`pedelec-native-host doctor --report report.txt` writes",
                )
            )

    # -- what to check ---------------------------------------------------------------
    def read_record(self) -> None:
        """The install record, through the same trusted reader uninstall uses."""
        path = record_path(self.env)
        try:
            self.record = load_record(path)
        except RecordError as exc:
            self.add(
                Finding(
                    Status.FAIL,
                    "install",
                    "install record",
                    str(exc),
                    "move it away, then run `pedelec-native-host install` again",
                    cause="install-record",
                )
            )
            return
        if self.record is None:
            self.add(Finding(Status.OK, "install", "install record", f"none at {path}"))
            return
        files, keys = len(self.record.files), len(self.record.registry)
        self.add(
            Finding(Status.OK, "install", "install record", f"{path}: {files} files, {keys} keys")
        )

    def check_image(self) -> None:
        """Each start image install wrote, and the sealed one of the bundle running
        doctor, through the reader the launcher's start uses: an image it would leave
        unused costs every start its imports again."""
        from native_host import startimage

        records = self.record.files if self.record else []
        images = [(e.path, FIX_AGAIN, "every source unchanged")
                  for e in records if e.role == START_IMAGE]  # fmt: skip
        if self.bundle is not None and (self.bundle.parent / startimage.IMAGE_NAME).exists():
            sealed = str(self.bundle.parent / startimage.IMAGE_NAME)
            images.append((sealed, "repair or reinstall the package", "sealed in the bundle"))
        for path, fix, proof in images:
            try:
                modules = len(startimage.read(path))
            except startimage.ImageUnusable as exc:
                self.add(
                    Finding(
                        Status.WARN,
                        "install",
                        "start image",
                        f"{path}: {exc.state}: {exc.detail}",
                        f"{fix} (the host works, but every start imports its modules the slow way)",
                    )
                )
                continue
            detail = f"{path}: {modules} modules, {proof}"
            self.add(Finding(Status.OK, "install", "start image", detail))

    def recorded_rows(self) -> list[BrowserRow]:
        """Browsers the install record says were registered."""
        if self.record is None:
            return []
        named = {b for e in self.record.files for b in e.browsers}
        named |= {b for e in self.record.registry for b in e.browsers}
        return [row for row in locations.rows_for(self.platform) if row.name in named]

    def recorded_profiles(self) -> list[Path]:
        """Profile roots (`install --user-data-dir`) the install record lists."""
        if self.record is None:
            return []
        return [
            Path(e.path).parent.parent
            for e in self.record.files
            if e.role == MANIFEST and e.browsers == [PROFILE]
        ]

    def installed_rows(self) -> list[BrowserRow]:
        """Browsers installed (their user data dir, or their program: `programs`), and
        for each registration no installed browser reads the first browser that reads
        it: on Windows one Chrome key serves nine browsers, and on Linux /etc/chromium
        serves three."""
        lookup = self._lookup()
        present: list[BrowserRow] = []
        registrations: set[str] = set()
        for row in locations.rows_for(self.platform):
            user_data = as_local(locations.row_user_data_dir(row, self.env, self.home))
            found = lookup.find(self._order(row))
            where = None if found is None else found.where
            if (
                user_data.is_dir()
                or (where is not None and where not in registrations)
                or programs.find_program(row, self.env, self.home, self.system_root).program
            ):
                present.append(row)
            if where is not None:
                registrations.add(where)
        return present

    # -- per browser -------------------------------------------------------------------
    def _lookup(self) -> manifests.Lookup:
        registry = self.registry_factory() if self.os is Os.WIN32 else None
        return manifests.Lookup(self.os, registry, self.system_root)

    def _order(self, row: BrowserRow) -> list[Target]:
        return locations.lookup_order(self.platform, self.env, self.home, row.name)

    def _policy_reader(self) -> PolicyReader:
        factory = self.policy_registry_factory
        if factory is None and self.os is Os.WIN32:
            factory = WindowsRegistry
        return PolicyReader(self.os, self.system_root, self.env.get("USER", ""), factory)

    def check_row(self, row: BrowserRow) -> None:
        """Sandbox, managed policy, the manifest it would load, and its host."""
        if row.sandbox is Sandbox.SNAP:
            self.add(sandbox.snap_finding(row))
            return
        policy = read_policy(row, self._policy_reader())
        user_level = policy is None or policy[0] is not Permission.SYSTEM_ONLY
        registered = self._lookup().find(self._order(row), user_level)
        if policy is not None:
            system = registered is not None and registered.target.scope is Scope.SYSTEM
            everyone = system_install(self.os)
            self.add(*policy_findings(row.name, policy[0], policy[1], system, everyone))
        self._check_manifest(row.name, self._order(row), _install_hint(row), row, user_level)

    def msi_folders(self) -> list[tuple[str, Path]]:
        """Where the per-user and per-machine MSIs say they installed their files
        (Windows; each remembers its folder in the registry): a host there is one of
        this package's own, whichever of the two the browser loads."""
        if self.os is not Os.WIN32:
            return []
        factory = self.policy_registry_factory or WindowsRegistry
        registry = factory()
        found = []
        for label, key in manifests.MSI_FOLDERS:
            folder = (registry.read_values(key) or {}).get(manifests.MSI_FOLDER_VALUE)
            if isinstance(folder, str) and folder:
                found.append((label, as_local(PureWindowsPath(folder))))
        return found

    def _ignored(self, order: Sequence[Target]) -> list[str]:
        """The user-level registrations a policy makes the browser pass over."""
        found = self._lookup().find([t for t in order if t.scope is Scope.USER])
        return [] if found is None else [found.where, *found.shadowed]

    def check_profile(self, directory: Path) -> None:
        target = locations.custom_target(directory.absolute())
        hint = _profile_hint(directory)
        self._check_manifest(f"profile {directory.name}", [target], hint, None, True)

    def check_row_extensions(self, row: BrowserRow) -> None:
        """The other end of the port: the extension in each of the browser's profiles."""
        if row.sandbox is Sandbox.SNAP:
            return  # nothing it runs can reach a host
        user_data = as_local(locations.row_user_data_dir(row, self.env, self.home))
        subject = extensions.row_subject(row, user_data, _install_hint(row))
        self.add(*extensions.extension_findings(subject, self._loaded.pop(row.name, None)))

    def check_profile_extensions(self, directory: Path) -> None:
        name = f"profile {directory.name}"
        subject = extensions.Subject(name, directory, self.os, _profile_hint(directory))
        self.add(*extensions.extension_findings(subject, self._loaded.pop(name, None)))

    def _check_manifest(
        self,
        subject: str,
        order: Sequence[Target],
        install_hint: str,
        row: BrowserRow | None,
        user_level: bool,
    ) -> None:
        """Manifest present, parsed, table checks, host identity, then the self-test.
        With user-level hosts off by policy, the user-level registrations passed over
        are named, and the fix is a system-level install."""
        fix = f"run `{install_hint}`" if user_level else system_install(self.os)
        registered = self._lookup().find(order, user_level)
        ignored = [] if user_level else self._ignored(order)
        if registered is None:
            looked = ", ".join(
                str(t.registry_key) if t.registry_key else str(self._lookup().local(t))
                for t in order
                if user_level or t.scope is not Scope.USER
            )
            passed_over = "" if user_level else "; user-level manifests ignored by policy"
            if ignored:
                passed_over += f": {', '.join(ignored)}"
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest present",
                    f"none (looked in {looked}){passed_over}",
                    fix,
                    NOT_FOUND,
                    "not-registered",
                )
            )
            return
        notes = []
        if registered.target.scope is Scope.SYSTEM:
            level = "per-machine" if self.os is Os.WIN32 else "system level"
            notes.append(f"{level}: the one {subject} loads")
        if ignored:
            notes.append(f"ignores {', '.join(ignored)}: user-level hosts are off by policy")
        if registered.shadowed:
            notes.append(f"shadows {', '.join(registered.shadowed)}")
        detail = registered.where + (f" ({'; '.join(notes)})" if notes else "")
        data, why = manifests.read_manifest(registered.path)
        self.seen.append(bug_report.Seen(subject, registered.where, data))
        if data is None and why == "file missing":
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest present",
                    f"{registered.where}: file missing",
                    fix,
                    NOT_FOUND,
                    "not-registered",
                )
            )
            return
        self.add(Finding(Status.OK, subject, "manifest present", detail))
        if data is None:
            self.add(
                Finding(
                    Status.FAIL,
                    subject,
                    "manifest JSON",
                    f"{registered.path}: {why}",
                    fix,
                    NOT_FOUND,
                    "registration-broken",
                )
            )
            return
        self.add(Finding(Status.OK, subject, "manifest JSON", "valid"))
        ctx = manifests.ManifestContext(
            registered.path, data, self.os, manifests.config_ids(self.env), install_hint
        )
        self._loaded[subject] = ctx
        desktop = locations.desktop_host_paths(self.platform, self.env, self.home)
        identity = manifests.host_identity(
            subject, registered, ctx.host_path, self.record, desktop, install_hint,
            self.bundle, self.msi_folders(),
        )  # fmt: skip
        self.add(identity)
        table, passed = manifests.run_manifest_table(subject, ctx)
        self.add(*table)
        # A host another user could have swapped is never started: that would run their
        # program as this user, the very thing the "path only yours" failure warns of.
        host = ctx.host_path if {"path executable", "path only yours", "type"} <= passed else None
        if row is not None and row.sandbox is Sandbox.FLATPAK and host is not None:
            pieces, host = sandbox.flatpak_findings(row, host, self.env, self.home)
            self.add(*pieces)
        if host is not None:
            self.add(*self._self_test(subject, host))
            self.add(*self._versions(subject, host))

    def _self_test(self, subject: str, host: Path) -> list[Finding]:
        """Start the host as Chrome does, once per host path, and reuse the verdict."""
        key = str(host)
        if key not in self._self_tests:
            self._self_tests[key] = selftest.run_self_test(host, self.env, self.timeout)
        return [dataclasses.replace(f, subject=subject) for f in self._self_tests[key]]

    def _versions(self, subject: str, host: Path) -> list[Finding]:
        """The version the host runs, and older ones still running, once per host path."""
        key = str(host)
        if key not in self._version_checks:
            self._version_checks[key] = running.version_findings("", host, self.env)
        return [dataclasses.replace(f, subject=subject) for f in self._version_checks[key]]

    # -- Core side -----------------------------------------------------------------------
    def check_core(self) -> None:
        for name, check in (
            ("Core", lambda: self.add(*core_side.core_findings(self.env))),
            ("origins.json", lambda: self.add(core_side.origin_policy_finding(self.env))),
            ("config.json", lambda: self.add(core_side.config_finding(self.env))),
            ("log location", lambda: self.add(core_side.log_finding(self.env))),
        ):
            self.isolated("core", name, check)


def diagnose(
    doctor: Doctor, browsers: Sequence[str] | None, user_data_dirs: Sequence[Path]
) -> list[Finding]:
    """Run every check: the named browsers and profile roots, else every installed
    browser and everything the install record lists. ValueError for an unknown name."""
    rows = list(locations.select_rows(doctor.platform, browsers)) if browsers else []
    doctor.isolated("install", "install record", doctor.read_record)
    doctor.isolated("install", "start image", doctor.check_image)
    profiles = list(user_data_dirs)

    def find_browsers() -> None:
        installed = doctor.installed_rows()
        rows.extend(installed + [r for r in doctor.recorded_rows() if r not in installed])
        profiles.extend(doctor.recorded_profiles())
        if not rows and not profiles:
            doctor.add(
                Finding(
                    Status.FAIL,
                    "browsers",
                    "browser installed",
                    "no Chromium-based browser found for this user",
                    "pass --browser NAME or --user-data-dir DIR",
                    NOT_FOUND,
                )
            )

    if not browsers and not user_data_dirs:
        doctor.isolated("browsers", "browser installed", find_browsers)
    for directory in profiles:
        check = functools.partial(doctor.check_profile, directory)
        doctor.isolated(f"profile {directory.name}", "manifest", check)
        check = functools.partial(doctor.check_profile_extensions, directory)
        doctor.isolated(f"profile {directory.name}", "extension", check)
    for row in rows:
        doctor.isolated(row.name, "browser", functools.partial(doctor.check_row, row))
        check = functools.partial(doctor.check_row_extensions, row)
        doctor.isolated(row.name, "extension", check)
    doctor.check_core()
    return doctor.findings


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pedelec-native-host doctor",
        description="Check every browser registration, the host itself and the Core.",
    )
    parser.add_argument("--json", action="store_true", help="print a machine-readable list")
    parser.add_argument(
        "--browser",
        action="extend",
        nargs="+",
        metavar="NAME",
        help=browser_names("check") + " (default: every browser installed)",
    )
    add_user_data_dir_option(parser, "check")
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="how long to wait for the host's ping answer, more than 0 (default 15)",
    )
    parser.add_argument(
        "--report",
        type=existing_parent,
        metavar="FILE",
        help="also write FILE, to attach to a bug report: versions, the system, every "
        "finding, the registrations, settings and the log's last lines, with home paths "
        "and other extension ids replaced and no prompt, token or tool argument",
    )
    return parser


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    """Print one line per check (or JSON); exit 1 when a check failed, 2 on a usage error."""
    args = _parser().parse_args(list(argv[1:]))
    stream = out or sys.stdout
    try:
        doctor = Doctor(
            sys.platform,
            os.environ,
            locations.home_from_env(os.environ, sys.platform),
            timeout=args.timeout,
            bundle=Path(sys.executable) if getattr(sys, "frozen", False) else None,
        )
        findings = diagnose(doctor, args.browser, args.user_data_dir)
    except (ValueError, locations.UnsupportedPlatformError) as exc:
        sys.stderr.write(f"pedelec-native-host doctor: error: {exc}\n")
        return USAGE_ERROR
    stream.write(render(findings, args.json))
    if args.report is not None:
        text = bug_report.compose(
            findings, render(findings, False), doctor.seen, doctor.record, doctor.env,
            doctor.home,
        )  # fmt: skip
        try:
            bug_report.write(args.report, text)
        except bug_report.ReportRefused as exc:
            sys.stderr.write(f"pedelec-native-host doctor: error: no report written: {exc}\n")
            return 1
        sys.stderr.write(f"report written to {args.report}: attach it to your bug report\n")
    return exit_status(findings)


__all__ = ["DEFAULT_TIMEOUT_S", "Doctor", "diagnose", "main"]
