"""Build the macOS host and its per-user installer package from this tree (on macOS):

    python3 packaging/macos/build.py [--out DIR] [--work DIR]

writes DIR/pedelec-native-host/ (the PyInstaller onedir bundle) and exactly one
DIR/pedelec-native-host-<version>.pkg (DIR defaults to dist/macos), built with Apple's
`pkgbuild` and `productbuild`. The package is unsigned (docs/install.md, "Release
artifacts", says what that costs a user). What it installs and how it registers the host
is pkg_plan.py's; this script only runs the tools.
"""

from __future__ import annotations

import argparse
import platform
import plistlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "release")]

import frozen  # noqa: E402 - packaging/release, shared with the Linux build
import pkg_plan  # noqa: E402 - beside this file

TOOLS = ("pkgbuild", "productbuild")
SYSTEM: str = sys.platform
"""Where this runs (a plain str: a type checker on Linux would call the build
unreachable)."""


def component_plist(bundle: Path, work: Path) -> Path:
    """pkgbuild's analysis of the payload, every bundle in it pinned in place."""
    analyzed = work / "components-analyzed.plist"
    frozen.run(["pkgbuild", "--analyze", "--root", bundle, analyzed])
    with analyzed.open("rb") as file:
        found = plistlib.load(file)
    pinned = work / "components.plist"
    with pinned.open("wb") as file:
        plistlib.dump(pkg_plan.pinned_components(found), file)
    return pinned


def scripts(work: Path) -> Path:
    """The folder pkgbuild takes its scripts from: `postinstall` alone, executable."""
    folder = work / "scripts"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    script = folder / "postinstall"
    script.write_text(pkg_plan.postinstall_script(), encoding="utf-8")
    script.chmod(0o755)
    return folder


def package(bundle: Path, out: Path, work: Path, version: str) -> Path:
    """The component package of `bundle` (in `work`), then the product archive in `out`."""
    component = work / pkg_plan.COMPONENT_NAME
    frozen.run([
        "pkgbuild", "--root", bundle, "--component-plist", component_plist(bundle, work),
        "--identifier", pkg_plan.IDENTIFIER, "--version", version,
        "--install-location", pkg_plan.INSTALL_LOCATION, "--scripts", scripts(work),
        component,
    ])  # fmt: skip
    distribution = work / "distribution.xml"
    distribution.write_text(
        pkg_plan.distribution_xml(version, platform.machine()), encoding="utf-8"
    )
    product = out / pkg_plan.pkg_name(version)
    frozen.run([
        "productbuild", "--distribution", distribution, "--package-path", work, product,
    ])  # fmt: skip
    return product


def build(out: Path, work: Path) -> Path:
    """The bundle and the package, built in `work`; returns the package's path."""
    if SYSTEM != "darwin":
        raise frozen.BuildError(f"the macOS package is built on macOS, not {SYSTEM}")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise frozen.BuildError(f"{', '.join(missing)} not found (Xcode's command line tools)")
    version = frozen.project_version()
    pkg_plan.host_architecture(platform.machine())
    print("-- PyInstaller onedir bundle", flush=True)
    executable = frozen.build_bundle(out, work / "pyinstaller")
    for old in out.glob("*.pkg"):
        old.unlink()
    print(f"-- {pkg_plan.pkg_name(version)} (pkgbuild, productbuild)", flush=True)
    product = package(executable.parent, out, work, version)
    print(f"-- wrote {product} ({product.stat().st_size / 1_048_576:.1f} MiB)", flush=True)
    return product


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=frozen.REPO / "dist" / "macos", metavar="DIR")
    parser.add_argument(
        "--work", type=Path, default=frozen.REPO / "build" / "macos-build", metavar="DIR",
        help="PyInstaller's work folder, the component package and its plist",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        work = args.work.resolve()
        work.mkdir(parents=True, exist_ok=True)
        build(args.out.resolve(), work)
    except (frozen.BuildError, pkg_plan.PlanError, OSError) as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
