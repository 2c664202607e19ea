"""Build the Windows host and its two MSIs from this tree:

    python3 packaging/windows/build.py [--out DIR] [--work DIR]

writes DIR/pedelec-native-host/ (the bundle) and exactly two MSIs of it (DIR defaults to
dist/windows): DIR/pedelec-native-host-<version>-x64.msi, installed by a user for
themselves, and DIR/pedelec-native-host-<version>-x64-machine.msi, installed by an
administrator for every user (msi_document.py, `SCOPES`). The same script
runs on this project's Debian CI, where every Windows step runs under Wine, and on a
Windows runner (.github/workflows/release.yml), where it runs natively; the steps differ
only by the table `TOOLS`.

The bundle (docs/install.md, "The Windows MSI"; docs/performance.md says why this and not
PyInstaller): the official embeddable CPython, its files minus `LEFT_OUT`; this tree's
wheel and its dependencies' win_amd64 wheels in `site-packages` (this package itself in
`native_host.zip`), compiled to unchecked .pyc files; `pedelec-native-host.exe`
(launcher.c, windows_calls.c), which runs the interpreter with the
host's entry point; the sealed start image of a relay start; the manifest naming the
official extension, its `path` relative to itself. Then the MSIs (msi_document.py), with
the registry keys of the locations table: HKCU's for the per-user package, HKLM's (what
`install --scope system` writes) for the per-machine one. Both install the bundle into a
folder of its version inside their install folder, beside `current` naming it
(`msi_root`; issue 30: an upgrade never touches a running host's files).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(HERE.parent / "release"), str(REPO)]

import archives  # noqa: E402 - packaging/release: pinned files, safe and reproducible archives
import authenticode  # noqa: E402 - packaging/windows, beside this file
import embeddable  # noqa: E402
import locked  # noqa: E402 - packaging/release: the hash-locked build environment
import msi_document  # noqa: E402
import msi_summary  # noqa: E402
import steps  # noqa: E402 - packaging/release, shared by every release build

from native_host import HOST_NAME, startimage, versions  # noqa: E402
from native_host.install import locations  # noqa: E402
from native_host.install.contents import render_manifest  # noqa: E402
from native_host.install.locations import Scope  # noqa: E402

EXECUTABLE = "pedelec-native-host.exe"
MANIFEST = f"{HOST_NAME}.json"
SITE_PACKAGES = "site-packages"
PACKAGE_ZIP = "native_host.zip"
PTH_LINES = ["python313.zip", PACKAGE_ZIP, ".", SITE_PACKAGES]
"""sys.path of the bundle: the standard library's zip, this package's zip, the bundle's
root (the .pyd modules), the other packages."""
PYTHON_OPTIONS = ["-I", "-S", "-B"]
"""As launcher.c runs the interpreter: isolated, no site, no .pyc written."""
BUILD_OPTIONS = ["-s", "-P", "-S", "-B"]
"""How the build runs the bundle's interpreter to compile: PYTHON_OPTIONS but for -E
(part of -I), which would ignore PYTHONHASHSEED; `build_environment` leaves it no
other PYTHON* variable to read."""
LEFT_OUT = {
    "pythonw.exe": "a windowed interpreter: nothing runs one",
    "_ssl.pyd": "the host speaks plain TCP on loopback (as the Linux bundle: no ssl)",
    "libssl-3.dll": "only _ssl loads it",
    "libcrypto-3.dll": "only _ssl and _hashlib load it",
    "_hashlib.pyd": "hashlib falls back to the built-in _sha2",
    "_sqlite3.pyd": "no database",
    "sqlite3.dll": "only _sqlite3 loads it",
    "_wmi.pyd": "platform's WMI query (Wine 8 lacks what it calls; platform falls back)",
    "winsound.pyd": "no sound",
    "python.cat": "the signature catalog of the files as python.org shipped them",
}
"""Files of the embeddable distribution the bundle does not ship, and why. python.exe is
used to build the bundle, then removed: pedelec-native-host.exe is its interpreter."""


@dataclass(frozen=True)
class Tools:
    """How one build system runs the Windows steps."""

    windows: Sequence[str]
    """The prefix that runs a Windows program (`wine` on Linux)."""
    compiler: str
    """MinGW-w64's gcc for launcher.c."""
    msi: str
    """`wixl` (msitools) on Linux; `wix3` (WiX 3's candle and light) on Windows."""


TOOLS = {
    "linux": Tools(("wine",), "x86_64-w64-mingw32-gcc", "wixl"),
    "win32": Tools((), "gcc", "wix3"),
}


def build_environment(source: Path) -> None:
    """What every step of this build runs with, so two builds of one commit write the
    same bytes: SOURCE_DATE_EPOCH (the commit's time: setuptools dates the wheel's
    entries with it) and a fixed string hash (marshal writes a frozenset constant of
    a .pyc or of the start image in its iteration order, which the hash decides); no
    other PYTHON* variable reaches the bundle's interpreter."""
    for name in [n for n in os.environ if n.startswith("PYTHON")]:
        del os.environ[name]
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ["SOURCE_DATE_EPOCH"] = str(archives.source_date_epoch(source))


def step(message: str) -> float:
    print(f"-- {message}", flush=True)
    return time.monotonic()


class Windows:
    """Runs Windows programs: natively, or under Wine with a prefix of the build's own."""

    def __init__(self, tools: Tools, work: Path) -> None:
        self.tools = tools
        self.env = dict(os.environ)
        if tools.windows:
            self.env.update(
                WINEPREFIX=str(work / "wine-prefix"),
                WINEDEBUG="-all",
                WINEDLLOVERRIDES="mscoree,mshtml=",
            )
            self.env.pop("DISPLAY", None)
            if not (work / "wine-prefix" / "system.reg").exists():
                (work / "wine-prefix").mkdir(parents=True, exist_ok=True)
                steps.run(["wineboot", "-i"], env=self.env, timeout=600)
                steps.run(["wineserver", "-w"], env=self.env, timeout=600)

    def path(self, path: Path) -> str:
        """The name a Windows program gives a path of this machine (Wine's Z: drive)."""
        if not self.tools.windows:
            return str(path)
        return "Z:" + str(path.resolve()).replace("/", "\\")

    def command(self, program: Path) -> list[str]:
        return [*self.tools.windows, str(program)]


def copy_source(dest: Path) -> Path:
    """This tree's files as a fresh clone would have them (tracked and new, nothing git
    ignores): setuptools would otherwise walk build/, where Wine links Z: to `/`."""
    top = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--show-toplevel"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    shutil.rmtree(dest, ignore_errors=True)
    own_tree = top.returncode == 0 and Path(top.stdout.strip()).resolve() == REPO.resolve()
    if not own_tree or listed.returncode != 0:  # an unpacked sdist, or a copy in another tree
        junk = shutil.ignore_patterns(".venv", "build", "dist", "*.egg-info", "__pycache__")
        shutil.copytree(REPO, dest, ignore=junk)
        return dest
    for name in filter(None, listed.stdout.split("\0")):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def dependency_wheels(dest: Path, lock: Path = locked.WINDOWS_RUNTIME_LOCK) -> list[Path]:
    """The win_amd64 CPython 3.13 wheels the bundle ships, exactly as `lock` pins them
    (`pip download --require-hashes`: a wheel the index serves with other bytes stops
    the build). Nothing of them runs: they are unzipped."""
    shutil.rmtree(dest, ignore_errors=True)
    try:
        steps.run([
            sys.executable, "-m", "pip", "download", "-q", *locked.REQUIRE_HASHES,
            "--platform", "win_amd64", "--python-version", "3.13", "--implementation", "cp",
            "--no-cache-dir", "-d", str(dest), "-r", str(lock),
        ], env=locked.pip_environment())  # fmt: skip
    except steps.BuildError as error:
        raise steps.BuildError(
            f"the win_amd64 wheels do not match {lock.name} ({lock}), refusing them:\n{error}"
        ) from None
    return sorted(dest.glob("*.whl"))


def project_wheel(python: Path, source: Path, dest: Path) -> Path:
    """This tree's wheel, built by the hash-locked build environment's setuptools (no
    build isolation: that would fetch setuptools unpinned)."""
    shutil.rmtree(dest, ignore_errors=True)
    steps.run([
        python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dest,
        source,
    ], env=locked.pip_environment())  # fmt: skip
    (wheel,) = dest.glob("*.whl")
    return wheel


def runtime(stage: Path, downloads: Path) -> None:
    """The embeddable CPython (checked against its pins and signatures), without what
    `LEFT_OUT` names."""
    source = embeddable.SOURCES.get(sys.platform, embeddable.PYPI_SDIST)
    embeddable.extract(source, downloads, stage, PTH_LINES)
    for name in LEFT_OUT:
        (stage / name).unlink(missing_ok=True)
    (stage / SITE_PACKAGES).mkdir()


def install_wheels(site: Path, found: Sequence[Path]) -> None:
    """Each wheel unzipped into `site`; a member named outside it refuses the wheel."""
    for wheel in found:
        with zipfile.ZipFile(wheel) as archive:
            archives.extract_zip(archive, site)


REPRODUCIBLE_C = ["-Wl,--no-insert-timestamp", f"-ffile-prefix-map={HERE}=."]
"""No link time in the PE header, and no build folder in anything the compiler writes
(-s already strips the symbols that would name it)."""


def launcher(tools: Tools, stage: Path) -> None:
    dll = f'L"{embeddable.PYTHON_DLL}"'
    steps.run([
        tools.compiler, "-municode", "-O2", "-s", "-Wall", "-Werror", *REPRODUCIBLE_C,
        f"-DPYTHON_DLL={dll}", "-o", str(stage / EXECUTABLE), str(HERE / "launcher.c"),
        str(HERE / "windows_calls.c"), "-ladvapi32", "-liphlpapi",
    ], cwd=HERE)  # fmt: skip


def compile_packages(windows: Windows, stage: Path) -> None:
    """Every module of site-packages compiled by the bundle's interpreter, as unchecked
    .pyc files: loaded without a look at the source's time, which the installer does not
    keep, and never rewritten (the launcher runs with -B). Each names its source by its
    path in the bundle (`-d`), not the building machine's folder."""
    steps.run([
        *windows.command(stage / "python.exe"), *BUILD_OPTIONS, "-m", "compileall", "-q",
        "-j", "1", "--invalidation-mode", "unchecked-hash", "-d", SITE_PACKAGES,
        windows.path(stage / SITE_PACKAGES),
    ], env=windows.env, timeout=600)  # fmt: skip


def zip_package(stage: Path) -> None:
    """This package, compiled, into one uncompressed zip: the five modules a start imports
    before its image can be read come from one open file instead of a directory walk
    each (about 20 ms of every start under Wine, where a file system call costs 1-2 ms).
    Each module's unchecked .pyc sits beside its source, where zipimport looks for it;
    the sources stay for tracebacks. Entries in name order, dated SOURCE_DATE_EPOCH."""
    package = stage / SITE_PACKAGES / "native_host"
    entries = []
    for source in sorted(package.rglob("*.py"), key=lambda p: p.as_posix().encode()):
        name = source.relative_to(package.parent).as_posix()
        compiled = source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc"
        entries += [(source, name), (compiled, name + "c")]
    entries.append((package / "py.typed", "native_host/py.typed"))
    epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    archives.write_zip(stage / PACKAGE_ZIP, entries, epoch, zipfile.ZIP_STORED)
    shutil.rmtree(package)


def sealed_image(windows: Windows, stage: Path) -> None:
    """The start image of a relay start, recorded and compiled by the bundle's own
    interpreter (its paths come from the ._pth)."""
    image = startimage.build(
        windows.command(stage / "python.exe"), BUILD_OPTIONS, [], windows.path(stage)
    )
    (stage / startimage.IMAGE_NAME).write_bytes(image)


def manifest(stage: Path) -> None:
    """Beside the executable, naming it relative to itself (Chrome on Windows resolves a
    relative `path` against the manifest's folder), allowing the official extension."""
    (stage / MANIFEST).write_bytes(render_manifest(EXECUTABLE, []))


INSTALL_SCOPES = {msi_document.PER_USER: Scope.USER, msi_document.PER_MACHINE: Scope.SYSTEM}
"""Which `install --scope` each package registers as."""


def host_keys(
    scope: msi_document.PackageScope = msi_document.PER_USER,
) -> list[msi_document.HostKey]:
    """The keys `install --scope user|system` writes on Windows, from the locations table
    (HKCU's or HKLM's)."""
    home = PureWindowsPath("C:/Users/user")
    targets = locations.targets("win32", {}, home, INSTALL_SCOPES[scope])
    keys = [t.registry_key for t in targets if t.registry_key is not None]
    return [msi_document.HostKey(k.hive, k.path) for k in dict.fromkeys(keys)]


def desktop_registration() -> msi_document.DesktopRegistration:
    """Pedelec Desktop's: the Chrome key (spec 5.1), its manifest under %USERPROFILE%."""
    (chrome,) = locations.select_rows("win32", ["chrome"])
    assert chrome.registry_vendor is not None
    key = msi_document.HostKey("HKCU", locations.registry_key_path(chrome.registry_vendor))
    home = PureWindowsPath("[%USERPROFILE]")
    found = locations.desktop_manifest_path("win32", home)
    assert found is not None
    return msi_document.DesktopRegistration(key, str(found))


def bundle_files(bundle: Path) -> list[str]:
    return sorted(PurePosixPath(p.relative_to(bundle)).as_posix() for p in bundle.rglob("*")
                  if p.is_file())  # fmt: skip


def msi_root(out: Path, bundle: Path, version: str) -> Path:
    """What the MSIs install into their install folder: the bundle in a folder of its
    version, and `current` naming it (native_host/versions.py), in `out/<name>-msi`."""
    root = out / f"{bundle.name}-msi"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(bundle, root / version)
    (root / versions.CURRENT).write_bytes(f"{version}\n".encode())
    return root


def package(
    tools: Tools, out: Path, root: Path, version: str, scope: msi_document.PackageScope
) -> Path:
    """The `scope` MSI of the install folder's contents in `out/<root name>`
    (`msi_root`), compiled in `out`."""
    product = msi_document.Product(
        msi_document.msi_version(version), f"{version}/{MANIFEST}", f"{version}/{EXECUTABLE}",
        version_folder=version,
    )  # fmt: skip
    files = bundle_files(root)
    desktop = desktop_registration() if scope is msi_document.PER_USER else None
    source = msi_document.document(
        product, files, root.name, host_keys(scope), desktop, tools.msi, scope,
    )  # fmt: skip
    wxs = out / f"pedelec-native-host-{scope.name}.wxs"
    wxs.write_text(source, encoding="utf-8")
    msi = out / scope.msi_name.format(version=version)
    # The cabinet inside the MSI records each file's time; neither wixl nor light takes
    # SOURCE_DATE_EPOCH.
    archives.date_tree(root, int(os.environ["SOURCE_DATE_EPOCH"]))
    if tools.msi == "wixl":
        steps.run(["wixl", "-a", "x64", "-o", msi.name, wxs.name], cwd=out)
        wixl_fixups(msi, product, files)
    else:
        wix = Path(os.environ.get("WIX", "")) / "bin"
        if not (wix / "candle.exe").is_file():
            raise steps.BuildError("WiX 3 not found: set WIX to its folder (WiX Toolset 3.14)")
        # light runs Windows Installer's ICE validation (wixl runs none): on a Windows
        # runner the package's rules are checked by Windows itself.
        steps.run([str(wix / "candle.exe"), "-nologo", "-arch", "x64", wxs.name], cwd=out)
        steps.run([str(wix / "light.exe"), "-nologo", "-o", msi.name,
             wxs.with_suffix(".wixobj").name], cwd=out)  # fmt: skip
    msi_summary.normalise(msi, msi_document.package_code(product.version, scope),
                          int(os.environ["SOURCE_DATE_EPOCH"]))  # fmt: skip
    return msi


PERMANENT_BIT = 0x10
"""msidbComponentAttributesPermanent."""
ROLLBACK_BITS = 0x500
"""msidbCustomActionTypeInScript | msidbCustomActionTypeRollback."""


def wixl_fixups(msi: Path, product: msi_document.Product, files: Sequence[str]) -> None:
    """What wixl leaves out of the document's meaning, set in its output with msitools'
    own msiinfo and msibuild (before msi_summary.normalise, which dates what msibuild
    saved): the version folder's components permanent (wixl takes no `Permanent`), and the
    rollback actions' type (wixl takes `Execute="rollback"` for an immediate action)."""
    permanent = msi_document.permanent_components(product, files)
    set_bits(msi, "Component", 3, dict.fromkeys(permanent, PERMANENT_BIT))
    rollback = msi_document.rollback_actions(product)
    set_bits(msi, "CustomAction", 1, dict.fromkeys(rollback, ROLLBACK_BITS))


def set_bits(msi: Path, table: str, column: int, bits: dict[str, int]) -> None:
    """Set `bits[row]` in the integer `column` of each named row of `table` (rows named by
    their first column)."""
    exported = steps.run(["msiinfo", "export", str(msi), table])
    lines = exported.splitlines()
    names = lines[0].split("\t")
    rows = [line.split("\t") for line in lines[3:] if line.strip()]
    values = {row[0]: int(row[column]) for row in rows}
    if not bits.keys() <= values.keys():
        raise steps.BuildError(f"{msi.name}'s {table} lacks {sorted(bits.keys() - values.keys())}")
    for name in sorted(bits):
        steps.run(["msibuild", str(msi), "-q",
                   f"UPDATE `{table}` SET `{names[column]}` = {values[name] | bits[name]} "
                   f"WHERE `{names[0]}` = '{name}'"])  # fmt: skip


def build(out: Path, work: Path) -> Path:
    """The bundle and the MSIs, built in `work` (its downloads, Wine prefix and staging
    kept for the next build); returns the per-user MSI's path (the per-machine one is
    beside it)."""
    tools = TOOLS.get(sys.platform)
    if tools is None:
        raise steps.BuildError(f"no Windows build on {sys.platform} (Linux under Wine, or Windows)")
    linux_only = ["wixl", "msiinfo", "msibuild", "osslsigncode"] if tools.msi == "wixl" else []
    for program in (*tools.windows[:1], tools.compiler, *linux_only):
        if shutil.which(program) is None:
            raise steps.BuildError(f"{program} not found (Debian: apt-get install wine wine64 "
                             "gcc-mingw-w64-x86-64 wixl msitools osslsigncode)")  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    started = step("this tree, and what every step runs with (SOURCE_DATE_EPOCH: its commit)")
    source = copy_source(work / "source")
    build_environment(REPO)
    version = steps.project_version(source)
    msi_document.msi_version(version)
    stage = work / "stage"
    step(f"the pinned inputs: the embeddable CPython {embeddable.VERSION}, checked")
    runtime(stage, work / "downloads")
    step(f"the win_amd64 wheels of {locked.WINDOWS_RUNTIME_LOCK.name}, hash-locked")
    found = dependency_wheels(work / "wheels")
    step(f"this tree's wheel, by the build environment of {locked.BUILD_LOCK.name}")
    found.append(project_wheel(locked.environment(work), source, work / "project-wheel"))
    install_wheels(stage / SITE_PACKAGES, found)
    step("Windows programs: " + ("Wine" if tools.windows else "native"))
    windows = Windows(tools, work)
    step("pedelec-native-host.exe (launcher.c)")
    launcher(tools, stage)
    step("unchecked .pyc files, by the bundle's interpreter; this package in its zip")
    compile_packages(windows, stage)
    zip_package(stage)
    step("the sealed start image, by the bundle's interpreter")
    sealed_image(windows, stage)
    manifest(stage)
    (stage / "python.exe").unlink()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.msi"), *out.glob("*.wxs")]:
        old.unlink()
    bundle = out / "pedelec-native-host"
    shutil.rmtree(bundle, ignore_errors=True)
    shutil.copytree(stage, bundle)
    root = msi_root(out, bundle, version)
    msis = []
    for scope in msi_document.SCOPES:
        step(f"the {scope.name} MSI ({tools.msi})")
        msi = package(tools, out, root, version, scope)
        size = msi.stat().st_size / 1_048_576
        print(f"-- wrote {msi} ({size:.1f} MiB) in {time.monotonic() - started:.0f} s", flush=True)
        msis.append(msi)
    return msis[0]


def main(argv: Sequence[str] | None = None) -> int:
    return steps.main(
        argv, doc=__doc__, build=build, system="windows",
        work_help="where downloads, the Wine prefix and the staging folder are kept",
        errors=(embeddable.EmbeddableError, authenticode.SignatureError,
                msi_document.PackageError, msi_summary.SummaryError),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
