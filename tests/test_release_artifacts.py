"""The release artifacts' pure parts, checked here although only the runners of
.github/workflows/release.yml build and install them: the macOS package's distribution,
postinstall and component plist (packaging/macos/pkg_plan.py), the Linux tarball's names
and layout (packaging/linux/build.py), and what the workflow asserts of an installed
artifact's `doctor` (packaging/release/doctor_gate.py)."""

from __future__ import annotations

import json
import os
import stat
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath

import pytest

from native_host import paths
from native_host.install.doctor.report import Finding, Status
from native_host.install.doctor.verdict import render
from native_host.install.locations import Sandbox, rows_for
from tests.support.release_scripts import release_module

pytestmark = pytest.mark.unit

pkg_plan = release_module("macos", "pkg_plan")
linux_build = release_module("linux", "build")
steps = release_module("release", "steps")
gate = release_module("release", "doctor_gate")

HOST = "/home/ann/.local/share/pedelec-native-host/pedelec-native-host"


# --- the macOS package -----------------------------------------------------------------
def distribution(version: str = "1.2.3", machine: str = "arm64") -> ET.Element:
    return ET.fromstring(pkg_plan.distribution_xml(version, machine))


def distribution_of(scope: object) -> ET.Element:
    return ET.fromstring(pkg_plan.distribution_xml("1.2.3", "arm64", scope))


def test_the_package_installs_only_into_the_users_home() -> None:
    domains = distribution().find("domains")
    assert domains is not None
    assert domains.attrib == {
        "enable_anywhere": "false",
        "enable_currentUserHome": "true",
        "enable_localSystem": "false",
    }


def test_the_one_choice_installs_the_component_at_the_packages_version() -> None:
    root = distribution("1.2.3")
    (choice,) = root.findall("choice")
    assert choice.get("visible") == "false"
    (chosen,) = choice.findall("pkg-ref")
    (component,) = root.findall("pkg-ref")
    assert chosen.get("id") == component.get("id") == pkg_plan.identifier("1.2.3")
    assert pkg_plan.identifier("1.2.3") == "cc.isaaclin.pedelec.native-host.1.2.3"
    assert component.get("version") == "1.2.3"
    assert component.text == pkg_plan.COMPONENT_NAME
    outline = root.find("choices-outline")
    assert outline is not None and [line.get("choice") for line in outline] == ["default"]


def test_the_package_names_the_architecture_it_was_built_for() -> None:
    for machine in ("arm64", "x86_64"):
        options = distribution(machine=machine).find("options")
        assert options is not None and options.get("hostArchitectures") == machine
    with pytest.raises(pkg_plan.PlanError, match="i386"):
        pkg_plan.distribution_xml("1.2.3", "i386")


def test_a_version_is_text_in_the_distribution_not_markup() -> None:
    title = distribution("1.0.0<b>").find("title")
    assert title is not None and title.text == f"{pkg_plan.TITLE} 1.0.0<b>"


def test_the_bundle_lands_in_the_hosts_own_folder_but_not_on_it() -> None:
    """The install location, taken inside the home, is a folder of the directory where
    the host keeps its config and install record on macOS; the payload must not be that
    directory itself (Installer would set its mode to the payload's)."""
    home = "/Users/ann"
    state = paths.platform_dir("state", {"HOME": home}, "darwin")
    installed = home + pkg_plan.install_location("1.2.3")
    config = paths.platform_dir("config", {"HOME": home}, "darwin")
    assert os.path.dirname(installed) == state == config
    assert installed != state


def test_each_version_has_a_folder_and_a_package_of_its_own() -> None:
    """Issue 30: a newer package never replaces a file of an older one (hosts may run from
    them), and Installer never takes it for an upgrade of it (which removes what the
    older receipt listed and the newer lacks): another folder, another identifier."""
    older, newer = pkg_plan.install_location("0.1.0"), pkg_plan.install_location("0.1.1")
    assert os.path.dirname(older) == os.path.dirname(newer) and older != newer
    assert pkg_plan.identifier("0.1.0") != pkg_plan.identifier("0.1.1")
    for bad in ("", "..", "0.1/../x"):
        with pytest.raises(pkg_plan.PlanError):
            pkg_plan.install_location(bad)


def test_the_output_names() -> None:
    assert pkg_plan.pkg_name("0.1.0") == "pedelec-native-host-0.1.0.pkg"
    assert pkg_plan.pkg_name("0.1.0") != pkg_plan.COMPONENT_NAME
    assert pkg_plan.pkg_name("0.1.0", pkg_plan.SYSTEM) == "pedelec-native-host-0.1.0-system.pkg"
    names = [n for s in pkg_plan.SCOPES for n in (pkg_plan.pkg_name("0.1.0", s), s.component_name)]
    assert len(set(names)) == 4


# --- the macOS system package (issue 31) ----------------------------------------------------
def test_the_system_package_installs_only_into_the_local_system() -> None:
    root = distribution_of(pkg_plan.SYSTEM)
    domains = root.find("domains")
    assert domains is not None
    assert domains.attrib == {
        "enable_anywhere": "false",
        "enable_currentUserHome": "false",
        "enable_localSystem": "true",
    }
    (component,) = root.findall("pkg-ref")
    assert component.get("id") == "cc.isaaclin.pedelec.native-host.system.1.2.3"
    assert component.text == pkg_plan.SYSTEM.component_name
    title = root.find("title")
    assert title is not None and title.text == f"{pkg_plan.TITLE} (every user) 1.2.3"


def test_the_two_packages_have_receipts_of_their_own() -> None:
    """Installer keeps a receipt per identifier: one package's upgrade or `pkgutil
    --forget` leaves the other's alone, and both can be installed at once."""
    assert pkg_plan.USER.identifier == pkg_plan.IDENTIFIER
    assert pkg_plan.identifier("1.2.3", pkg_plan.SYSTEM) != pkg_plan.identifier("1.2.3")


def test_the_system_postinstall_registers_for_every_user_with_the_bundles_own_install() -> None:
    script = pkg_plan.postinstall_script("1.2.3", pkg_plan.SYSTEM)
    assert script.startswith("#!/bin/sh\n")
    assert f'expected="${{3%/}}{pkg_plan.install_location("1.2.3")}"' in script
    assert script.rstrip().endswith(
        f'exec "$destination/{pkg_plan.EXECUTABLE}" install --scope system --browser all'
    )


def test_doctor_names_the_system_package_this_script_builds() -> None:
    """What doctor tells a user whose browser ignores per-user hosts to install."""
    from native_host.install.doctor.browser_policy import system_install
    from native_host.install.locations import Os

    named = system_install(Os.DARWIN, "0.1.0")
    assert f"sudo installer -pkg {pkg_plan.pkg_name('0.1.0', pkg_plan.SYSTEM)} -target /" in named


def test_postinstall_expects_the_payload_where_pkgbuild_puts_it() -> None:
    script = pkg_plan.postinstall_script("1.2.3")
    assert script.startswith("#!/bin/sh\n")
    assert f'suffix="{pkg_plan.install_location("1.2.3")}"' in script
    assert script.rstrip().endswith(
        f'exec "$destination/{pkg_plan.EXECUTABLE}" install --browser all'
    )
    assert "sudo" not in script.replace("without sudo", "")


def test_every_bundle_pkgbuild_finds_is_pinned_in_place() -> None:
    analyzed: list[dict[str, object]] = [
        {
            "RootRelativeBundlePath": "_internal/Python.framework",
            "BundleIsRelocatable": True,
            "BundleIsVersionChecked": True,
            "BundleHasStrictIdentifier": True,
            "BundleOverwriteAction": "update",
            "ChildBundles": [{"RootRelativeBundlePath": "x.app", "BundleOverwriteAction": ""}],
        },
        {"RootRelativeBundlePath": "_internal/Other.bundle"},
    ]
    pinned = pkg_plan.pinned_components(analyzed)
    assert [c["RootRelativeBundlePath"] for c in pinned] == [
        "_internal/Python.framework",
        "_internal/Other.bundle",
    ]
    for component in pinned:
        assert component["BundleIsRelocatable"] is False
        assert component["BundleIsVersionChecked"] is False
        assert component["BundleOverwriteAction"] == "upgrade"
    assert pinned[0]["ChildBundles"] == analyzed[0]["ChildBundles"]
    assert analyzed[0]["BundleIsRelocatable"] is True  # the analysis itself is left alone
    with pytest.raises(pkg_plan.PlanError):
        pkg_plan.pinned_components([{"BundleIsRelocatable": True}])


# --- the Linux tarball -----------------------------------------------------------------
def test_the_tarball_is_named_by_version_and_machine() -> None:
    name = linux_build.tarball_name("0.1.0", "x86_64")
    assert name == "pedelec-native-host-0.1.0-linux-x86_64.tar.gz"
    assert linux_build.tarball_name("0.1.0", "AMD64") == name
    assert linux_build.tarball_name("0.1.0", "aarch64").endswith("-linux-aarch64.tar.gz")
    with pytest.raises(steps.BuildError, match="sparc"):
        linux_build.tarball_name("0.1.0", "sparc")


def test_doctor_names_the_tarball_this_script_builds() -> None:
    """What doctor tells a Linux user whose browser ignores per-user hosts to install."""
    from native_host.install.doctor.browser_policy import system_install
    from native_host.install.locations import Os

    named = system_install(Os.LINUX, "0.1.0", "aarch64")
    assert f"extract {linux_build.tarball_name('0.1.0', 'aarch64')} into /opt" in named
    assert named.endswith("install --scope system --browser all`")


def fake_bundle(root: Path) -> Path:
    """A onedir bundle's shape: the executable, `_internal` with a library, a .pyc module,
    a link inside the bundle, and a file the build left group-writable."""
    bundle = root / "pedelec-native-host"
    (bundle / "_internal" / "native_host").mkdir(parents=True)
    (bundle / "pedelec-native-host").write_bytes(b"\x7fELF executable")
    (bundle / "pedelec-native-host").chmod(0o755)
    (bundle / "_internal" / "libpython3.13.so.1.0").write_bytes(b"library")
    (bundle / "_internal" / "native_host" / "cli.pyc").write_bytes(b"module")
    (bundle / "_internal" / "libpython3.13.so").symlink_to("libpython3.13.so.1.0")
    (bundle / "_internal" / "base_library.zip").write_bytes(b"zip")
    (bundle / "_internal" / "base_library.zip").chmod(0o664)
    return bundle


def test_the_tarball_holds_the_bundle_in_its_version_folder_under_one_top_folder(
    tmp_path: Path,
) -> None:
    bundle = fake_bundle(tmp_path / "dist")
    tarball = linux_build.write_tarball(
        bundle, tmp_path / "out" / "x.tar.gz", 1_700_000_000, "0.1.0"
    )
    assert sorted(p.name for p in tarball.parent.iterdir()) == ["x.tar.gz"]  # no .partial
    with tarfile.open(tarball) as archive:
        members = {m.name: m for m in archive.getmembers()}
    top = "pedelec-native-host/0.1.0"
    expected = {"pedelec-native-host", top} | {
        f"{top}/{p.relative_to(bundle).as_posix()}" for p in bundle.rglob("*")
    }
    assert set(members) == expected  # the bundle, all of it, and nothing else
    assert members["pedelec-native-host"].isdir() and members[top].isdir()
    executable = members[f"{top}/pedelec-native-host"]
    assert executable.isfile() and executable.mode & 0o777 == 0o755
    link = members[f"{top}/_internal/libpython3.13.so"]
    assert link.issym() and link.linkname == "libpython3.13.so.1.0"
    assert members[f"{top}/_internal/base_library.zip"].mode & 0o777 == 0o644
    for member in members.values():
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
        assert not member.mode & (stat.S_IWGRP | stat.S_IWOTH), member.name


def test_the_tarball_extracts_as_the_docs_say_and_stays_in_its_folder(tmp_path: Path) -> None:
    """Extracted into a folder (docs/install.md: `tar -xzf <tarball> -C <dir>`, which
    .ci/run runs), it gives one folder and its executable; no member has an absolute
    name, climbs out with `..`, or links out of the folder: what tarfile's "data" filter
    refuses, checked by hand too, as Debian's CPython 3.11.2 predates the filter."""
    bundle = fake_bundle(tmp_path / "dist")
    tarball = linux_build.write_tarball(bundle, tmp_path / "x.tar.gz", 1_700_000_000, "0.1.0")
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            name = PurePosixPath(member.name)
            assert not name.is_absolute() and ".." not in name.parts, member.name
            if member.issym():
                target = PurePosixPath(os.path.normpath(name.parent / member.linkname))
                assert target.parts[0] == "pedelec-native-host", member.name
    share = tmp_path / "share"
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(tarball) as archive:
        archive.extractall(share, **safe)  # type: ignore[arg-type]
    assert sorted(p.name for p in share.iterdir()) == ["pedelec-native-host"]
    executable = share / "pedelec-native-host" / "0.1.0" / "pedelec-native-host"
    assert executable.read_bytes() == b"\x7fELF executable"
    assert executable.stat().st_mode & stat.S_IXUSR


def test_a_newer_tarball_extracted_the_same_way_touches_no_file_of_the_older(
    tmp_path: Path,
) -> None:
    """The documented upgrade: the newer tarball extracted where the older was adds its
    own version folder; no member of it names a file of the older, so every file of the
    older stays as it was, the same inode with the same content (hosts may be running
    from them)."""
    older_bundle = fake_bundle(tmp_path / "a")
    older = linux_build.write_tarball(older_bundle, tmp_path / "old.tar.gz", 1_700_000_000, "0.1.0")
    newer_bundle = fake_bundle(tmp_path / "b")
    (newer_bundle / "_internal" / "native_host" / "cli.pyc").write_bytes(b"newer module")
    newer = linux_build.write_tarball(newer_bundle, tmp_path / "new.tar.gz", 1_700_000_000, "0.1.1")
    share = tmp_path / "share"
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(older) as archive:
        archive.extractall(share, **safe)  # type: ignore[arg-type]
    root = share / "pedelec-native-host"

    def state() -> dict[Path, tuple[int, bytes]]:
        found = sorted((root / "0.1.0").rglob("*"))
        return {p: (p.lstat().st_ino, p.read_bytes() if p.is_file() else b"") for p in found}

    before = state()
    with tarfile.open(newer) as archive:
        names = archive.getnames()
        archive.extractall(share, **safe)  # type: ignore[arg-type]
    assert [n for n in names if n.startswith("pedelec-native-host/0.1.0")] == []
    assert state() == before
    assert sorted(p.name for p in root.iterdir()) == ["0.1.0", "0.1.1"]
    assert (root / "0.1.1/_internal/native_host/cli.pyc").read_bytes() == b"newer module"


def test_a_link_out_of_the_bundle_is_refused(tmp_path: Path) -> None:
    bundle = fake_bundle(tmp_path / "dist")
    (bundle / "_internal" / "escape").symlink_to(tmp_path)
    with pytest.raises(steps.BuildError, match="links out of the bundle"):
        linux_build.write_tarball(bundle, tmp_path / "x.tar.gz", 1_700_000_000, "0.1.0")
    assert not (tmp_path / "x.tar.gz").exists()


# --- what the workflow asserts of an installed artifact's doctor ----------------------
def report(browsers: list[str], changes: dict[str, Finding] | None = None) -> list[dict[str, str]]:
    """A doctor --json report of a registered, answering host (the Core down, as on a
    runner); `changes` replaces a line (keyed `<browser>/<check>`) or adds one."""
    changed = dict(changes or {})
    findings = [Finding(Status.OK, "install", "install record", "13 files, 0 keys")]
    for browser in browsers:
        for check in gate.REQUIRED_OK:
            detail = HOST if check == gate.NAMES_THE_HOST else "ok"
            line = Finding(Status.OK, browser, check, detail)
            findings.append(changed.pop(f"{browser}/{check}", line))
        findings.append(Finding(Status.WARN, browser, "profiles", "none"))
    findings.append(Finding(Status.FAIL, "core", "Core answers ping", "no Core endpoint to try"))
    findings.extend(changed.values())
    parsed: list[dict[str, str]] = gate.findings_of(json.loads(render(findings, as_json=True)))
    return parsed


def test_a_registered_answering_host_passes_with_the_core_down() -> None:
    assert gate.judge(report(["chrome", "edge"]), ["chrome", "edge"], HOST) == []


def test_the_gate_fails_what_a_user_would_see_fail() -> None:
    browsers = ["chrome", "edge"]
    missing = [f for f in report(browsers) if (f["subject"], f["check"]) != ("edge", "name")]
    assert gate.judge(missing, browsers, HOST) == ["edge: no `name` line"]
    another = Finding(Status.WARN, "chrome", "host registered", "another host: /opt/x")
    assert gate.judge(report(browsers, {"chrome/host registered": another}), browsers, HOST) == [
        "chrome: host registered: warn: another host: /opt/x"
    ]
    elsewhere = Finding(Status.OK, "edge", "path exists", "/opt/other/pedelec-native-host")
    assert gate.judge(report(browsers, {"edge/path exists": elsewhere}), browsers, HOST) == [
        f"edge: registers /opt/other/pedelec-native-host, not {HOST}"
    ]
    silent = Finding(Status.FAIL, "chrome", "host answers ping", "exited 1")
    problems = gate.judge(report(browsers, {"chrome/host answers ping": silent}), browsers, HOST)
    assert problems == ["chrome: host answers ping: fail: exited 1"]
    logs = Finding(Status.FAIL, "logs", "log location", "not writable")
    assert gate.judge(report(browsers, {"x": logs}), browsers, HOST) == [
        "logs: log location: fail: not writable"
    ]


def test_a_browser_missing_from_the_report_fails_the_gate() -> None:
    problems = gate.judge(report(["chrome"]), ["chrome", "arc"], HOST)
    assert problems == [f"arc: no `{check}` line" for check in gate.REQUIRED_OK]


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_the_gate_judges_every_browser_install_registers(platform: str) -> None:
    """Every row of the table but the sandboxed (Linux's Flatpak and Snap builds)."""
    browsers = gate.registered_browsers(platform)
    rows = rows_for(platform)
    assert browsers == [r.name for r in rows if r.sandbox is Sandbox.NONE]
    assert "chrome" in browsers and len(browsers) >= 10
    assert not any(name.endswith(("-flatpak", "-snap")) for name in browsers)
