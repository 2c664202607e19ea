"""The PyInstaller onedir bundle of packaging/pedelec-native-host.spec that the Linux and
macOS release builds ship, built by PyInstaller from the hash-locked build environment
(locked.py: PyInstaller, its bootloader and the host's dependencies exactly as
packaging/locks/build.txt pins them) on the interpreter that runs the build, and its
sealed start image.

Stdlib only, like every build script here: it runs before anything is installed
(native_host's start image is read from this tree). (The Windows build,
packaging/windows/build.py, bundles the embeddable CPython instead; docs/performance.md
says why.)
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import locked
from archives import source_date_epoch
from steps import REPO, BuildError, project_version, run

SPEC = REPO / "packaging" / "pedelec-native-host.spec"
BUNDLE_NAME = "pedelec-native-host"
"""The onedir folder and its executable, as the spec names both."""
SEAL_OPTIONS = ["-s", "-P", "-S", "-B"]
"""How the bundle's start image is recorded: as the bundle runs (no site, no user
folder, no script folder on the path), writing nothing into it, but without -E (part of
-I), which would ignore the PYTHONHASHSEED of `reproducible_environment`."""


def build_bundle(dist: Path, work: Path) -> Path:
    """dist/pedelec-native-host/, freshly built (an old one is replaced) in `work`,
    sealed, and checked to start: returns its executable."""
    python = locked.environment(work)
    bundle = dist / BUNDLE_NAME
    shutil.rmtree(bundle, ignore_errors=True)
    run([
        python, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
        "--distpath", dist, "--workpath", work, SPEC,
    ], cwd=REPO, env=reproducible_environment(), timeout=1800)  # fmt: skip
    executable = bundle / BUNDLE_NAME
    seal(bundle, python)
    printed = run([executable, "version"], timeout=120).strip()
    if project_version() not in printed:
        raise BuildError(f"{executable} version printed {printed!r}, not {project_version()}")
    return executable


def reproducible_environment() -> dict[str, str]:
    """PyInstaller's environment for a build two clones of one commit agree on byte for
    byte (PyInstaller's own advice): a fixed string hash (marshal writes a frozenset
    constant of a .pyc in its iteration order) and the commit's time as
    SOURCE_DATE_EPOCH."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
    return {**env, "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": str(source_date_epoch())}


def seal(bundle: Path, python: Path) -> Path:
    """The bundle's sealed start image (native_host/startimage.py), beside its executable:
    recorded by `python`, the interpreter it was frozen from, importing from the bundle's
    own folders alone, so the image holds the very code the executable would load from
    them (PyInstaller's `noarchive` modules are plain .pyc files there). Its executable
    starts from it (packaging/entry.py): faster, and everything a relay may import is in
    memory from its start on."""
    sys.path.insert(0, str(REPO))
    from native_host import startimage

    internal = bundle / "_internal"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    found = [internal / "base_library.zip", internal / version / "lib-dynload", internal]
    paths = [str(path) for path in found if path.exists()]
    try:
        image = startimage.build(
            str(python),
            SEAL_OPTIONS,
            paths,
            sealed_root=str(bundle),
            only_these_paths=True,
            environment=reproducible_environment(),
        )
    except OSError as exc:
        raise BuildError(f"the bundle's start image: {exc}") from None
    target = bundle / startimage.IMAGE_NAME
    target.write_bytes(image)
    target.chmod(0o644)
    return target


def main(argv: list[str]) -> int:
    """`python3 packaging/release/frozen.py seal DIR`: the sealed start image of the bundle
    in DIR, which PyInstaller built with this interpreter (docs/install.md, "Building the
    frozen bundle"); exit 2 on a usage error, 1 when it cannot be written."""
    if len(argv) != 2 or argv[0] != "seal":
        sys.stderr.write("usage: frozen.py seal DIR  (a PyInstaller onedir bundle)\n")
        return 2
    bundle = Path(argv[1])
    if not (bundle / BUNDLE_NAME).is_file():
        sys.stderr.write(f"frozen.py: no {BUNDLE_NAME} in {bundle}\n")
        return 2
    try:
        written = seal(bundle, Path(sys.executable))
    except BuildError as exc:
        sys.stderr.write(f"frozen.py: {exc}\n")
        return 1
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
