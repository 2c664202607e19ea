"""Build the macOS host and its two installer packages from this tree (on macOS):

    python3 packaging/macos/build.py [--out DIR] [--work DIR]

writes DIR/pedelec-native-host/ (the PyInstaller onedir bundle) and exactly two packages
of it (DIR defaults to dist/macos), built with Apple's `pkgbuild` and `productbuild`:
DIR/pedelec-native-host-<version>.pkg, for the user who installs it, and
DIR/pedelec-native-host-<version>-system.pkg, for every user of the machine (an
administrator's). They are unsigned (docs/install.md, "Release artifacts", says what that
costs a user). What each installs and how it registers the host is pkg_plan.py's
(`SCOPES`); this script only runs the tools.
"""

from __future__ import annotations

import platform
import plistlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "release")]

import archives  # noqa: E402 - packaging/release: reproducible archives
import frozen  # noqa: E402 - packaging/release, shared with the Linux build
import pkg_plan  # noqa: E402 - beside this file
import steps  # noqa: E402 - packaging/release, shared by every release build

TOOLS = ("pkgbuild", "productbuild")
SYSTEM: str = sys.platform
"""Where this runs (a plain str: a type checker on Linux would call the build
unreachable)."""


def component_plist(bundle: Path, work: Path) -> Path:
    """pkgbuild's analysis of the payload, every bundle in it pinned in place."""
    analyzed = work / "components-analyzed.plist"
    steps.run(["pkgbuild", "--analyze", "--root", bundle, analyzed])
    with analyzed.open("rb") as file:
        found = plistlib.load(file)
    pinned = work / "components.plist"
    with pinned.open("wb") as file:
        plistlib.dump(pkg_plan.pinned_components(found), file)
    return pinned


def scripts(work: Path, version: str, scope: pkg_plan.PkgScope) -> Path:
    """The folder pkgbuild takes a package's scripts from: `postinstall` alone,
    executable."""
    folder = work / f"scripts-{scope.identifier}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    script = folder / "postinstall"
    script.write_text(pkg_plan.postinstall_script(version, scope), encoding="utf-8")
    script.chmod(0o755)
    return folder


def package(
    bundle: Path, out: Path, work: Path, version: str, scope: pkg_plan.PkgScope, plist: Path
) -> Path:
    """The component package of `bundle` (in a folder of `work` of its own, where
    productbuild finds it alone), then the product archive in `out`."""
    components = work / f"components-{scope.identifier}"
    shutil.rmtree(components, ignore_errors=True)
    components.mkdir(parents=True)
    steps.run([
        "pkgbuild", "--root", bundle, "--component-plist", plist,
        "--identifier", pkg_plan.identifier(version, scope), "--version", version,
        "--install-location", pkg_plan.install_location(version),
        "--scripts", scripts(work, version, scope),
        components / scope.component_name,
    ])  # fmt: skip
    distribution = work / f"distribution-{scope.identifier}.xml"
    distribution.write_text(
        pkg_plan.distribution_xml(version, platform.machine(), scope), encoding="utf-8"
    )
    product = out / pkg_plan.pkg_name(version, scope)
    steps.run([
        "productbuild", "--distribution", distribution, "--package-path", components, product,
    ])  # fmt: skip
    return product


def build(out: Path, work: Path) -> Path:
    """The bundle and both packages, built in `work`; returns the per-user package's
    path (the system one is beside it)."""
    if SYSTEM != "darwin":
        raise steps.BuildError(f"the macOS package is built on macOS, not {SYSTEM}")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise steps.BuildError(f"{', '.join(missing)} not found (Xcode's command line tools)")
    work.mkdir(parents=True, exist_ok=True)
    version = steps.project_version()
    pkg_plan.host_architecture(platform.machine())
    print("-- PyInstaller onedir bundle", flush=True)
    executable = frozen.build_bundle(out, work / "pyinstaller")
    for old in out.glob("*.pkg"):
        old.unlink()
    # Every payload file dated SOURCE_DATE_EPOCH first: pkgbuild records each file's time
    # in the payload and its bill of materials (what else it and productbuild date, the xar
    # table of contents among it, only a macOS runner can show).
    archives.date_tree(executable.parent, archives.source_date_epoch())
    plist = component_plist(executable.parent, work)
    products = []
    for scope in pkg_plan.SCOPES:
        print(f"-- {pkg_plan.pkg_name(version, scope)} (pkgbuild, productbuild)", flush=True)
        product = package(executable.parent, out, work, version, scope, plist)
        print(f"-- wrote {product} ({product.stat().st_size / 1_048_576:.1f} MiB)", flush=True)
        products.append(product)
    return products[0]


def main(argv: Sequence[str] | None = None) -> int:
    return steps.main(
        argv, doc=__doc__, build=build, system="macos",
        work_help="PyInstaller's work folder, the component package and its plist",
        errors=(pkg_plan.PlanError,),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
