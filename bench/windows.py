"""The Windows host's start-up under Wine, against the minimal relay run by the same
Windows CPython (issue 24): what the MSI installs, started as Chrome on Windows starts it.

    python3 bench/windows.py [--runs N] [--quick] [--pyinstaller EXE | --build-pyinstaller]
                             [--json FILE]

Needs the Windows lane (tests/windows/setup_lane.py) and the MSI packaging/windows/build.py
wrote (dist/windows); installs it in the lane's prefix for the run and removes it after.
Each sample: the lane's Windows Python runs tests/windows/chrome_start.py `--timing`, which
times from just before CreateProcess to the host's first bytes on stdout, the answer to
one `ping` written at once (the dev Core on loopback answers it). Two ways to start:

- as Chrome does: HKCU -> manifest -> `cmd.exe /d /s /c ""<path>" chrome-extension://<id>/
  --parent-window=0"`. The MSI's host is its registration; the floor is
  bench/relay_host.py behind a one-line batch file (a manifest names no arguments):
  `@"<python.exe>" -I -S "<relay_host.py>" %*`;
- directly (CreateProcess of the program, as Chrome's NativeHostsExecutablesLaunchDirectly
  policy starts an .exe host): `pedelec-native-host.exe <origin>` against
  `python.exe -I -S relay_host.py <origin>`.

Rounds interleave the variants (the order rotated each round) and ratios are paired per
round, as in bench/run.py. Wine 8's GetExtendedTcpTable looks up an owner for every
socket of the network namespace by walking every process's descriptors (real Windows
answers in milliseconds), so each TIME_WAIT socket the run itself leaves (a host start
leaves two) makes every later start of the host slower: .ci/run runs this in a namespace
of its own that keeps none (`sysctl net.ipv4.tcp_max_tw_buckets=0`), and the run says
when it is not in one. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import Target, fmt, paired_ratios, row, summarize
from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID, versions
from native_host.devcore import DevCore, DevCoreSettings
from native_host.install.contents import render_manifest
from tests.support import msi
from tests.support.wine import (
    DRIVER,
    LANE,
    lane_problem,
    linux_path,
    windows_path,
    wine_environment,
)

TARGET = Target(1.25, "x")
"""Issue 24: the installed host within 1.25x of the minimal relay, started as Chrome does."""
RELAY = Path(__file__).resolve().parent / "relay_host.py"
ORIGIN = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
PING = b'{"type":"ping","requestId":"bench-ping"}'
TIMING = re.compile(rb"chrome_start: first bytes after ([\d.]+) ms")
DEFAULT_RUNS = {"full": 20, "quick": 5}


class Variant:
    """One way to start one host: chrome_start.py's arguments."""

    def __init__(self, label: str, how: list[str]) -> None:
        self.label = label
        self.how = how


def sample(variant: Variant, env: dict[str, str]) -> float:
    """Milliseconds from CreateProcess to the ping's answer, through chrome_start.py. The
    port stays open until the answer is read (a host exits at EOF, abandoning what is in
    flight, spec 7.13)."""
    process = subprocess.Popen(
        ["wine", str(LANE.python), windows_path(DRIVER), "--timing", *variant.how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(len(PING).to_bytes(4, "little") + PING)
        process.stdin.flush()
        length = int.from_bytes(process.stdout.read(4), "little")
        answer = process.stdout.read(length)
    finally:
        process.stdin.close()
        process.wait(timeout=120)
    errors = process.stderr.read() if process.stderr is not None else b""
    found = TIMING.search(errors)
    if found is None or b'"ok":true' not in answer.replace(b" ", b""):
        raise RuntimeError(f"{variant.label}: no answer\n{answer!r}\n{errors!r}")
    return float(found.group(1))


def floor_manifest(root: Path) -> Path:
    """The relay behind a batch file, and a manifest naming it."""
    batch = root / "relay.bat"
    batch.write_bytes(
        f'@"{windows_path(LANE.python)}" -I -S "{windows_path(RELAY)}" %*\r\n'.encode("ascii")
    )
    manifest = root / f"{HOST_NAME}.json"
    manifest.write_bytes(render_manifest(windows_path(batch), []))
    return manifest


def variants(root: Path, installed: str, pyinstaller: Path | None) -> dict[str, list[Variant]]:
    """Per way of starting: the floor first, then the hosts."""
    python, relay = windows_path(LANE.python), windows_path(RELAY)
    chrome = [
        Variant("relay (floor)", ["--manifest", windows_path(floor_manifest(root))]),
        Variant("MSI host", ["--registry", HOST_NAME]),
    ]
    direct = [
        Variant("relay (floor)", ["--command", f'"{python}" -I -S "{relay}" {ORIGIN}']),
        Variant("MSI host", ["--command", f'"{installed}" {ORIGIN}']),
    ]
    if pyinstaller is not None:
        frozen = windows_path(pyinstaller)
        pyi_manifest = root / "pyinstaller" / f"{HOST_NAME}.json"
        pyi_manifest.parent.mkdir()
        pyi_manifest.write_bytes(render_manifest(frozen, []))
        chrome.append(Variant("PyInstaller onedir", ["--manifest", windows_path(pyi_manifest)]))
        direct.append(Variant("PyInstaller onedir", ["--command", f'"{frozen}" {ORIGIN}']))
    return {"as Chrome starts it (HKCU, manifest, cmd.exe)": chrome,
            "directly (CreateProcess of the program)": direct}  # fmt: skip


def measure(groups: dict[str, list[Variant]], env: dict[str, str], runs: int) -> list[Any]:
    rows = []
    for title, group in groups.items():
        print(f"\n{title}")
        for variant in group:  # warm: the first start of each loads its files
            sample(variant, env)
        samples: dict[str, list[float]] = {v.label: [] for v in group}
        for index in range(runs):
            shift = index % len(group)
            for variant in [*group[shift:], *group[:shift]]:
                samples[variant.label].append(sample(variant, env))
        floor = samples[group[0].label]
        for variant in group:
            values = samples[variant.label]
            ratio = summarize(paired_ratios(values, floor)) if variant is not group[0] else None
            line = row(f"{variant.label}", summarize(values), "ms",
                       summarize(floor) if ratio else None, ratio,
                       TARGET if ratio and variant.label == "MSI host" else None)  # fmt: skip
            line["how"] = title
            line["samples"] = values
            rows.append(line)
            text = f"  {line['label']:<22} {fmt(line['value'])} ms"
            if ratio is not None:
                text += f"   ratio {fmt(line['ratio'], 'x')}"
            if line["target"]:
                text += f"   target {line['target']}: {line['verdict']}"
            print(text)
    return rows


PYINSTALLER_BUILD = LANE.root.parent / "windows-pyinstaller"


def build_pyinstaller() -> Path:
    """The PyInstaller onedir build of packaging/pedelec-native-host.spec, made under Wine
    by a copy of the lane's Windows CPython (with `site`, pip run from its wheel, and
    without _wmi.pyd, which Wine 8 cannot serve: ../shared/WINDOWS-BUILD-AND-MSI.md);
    its .exe. Slow (minutes), for docs/performance.md's comparison."""
    import shutil

    python_dir = PYINSTALLER_BUILD / "python"
    exe = PYINSTALLER_BUILD / "dist" / "pedelec-native-host" / "pedelec-native-host.exe"
    env = wine_environment()

    def run(*args: str) -> None:
        done = subprocess.run(["wine", str(python_dir / "python.exe"), *args], env=env,
                              capture_output=True, stdin=subprocess.PIPE, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(
                f"{args[:3]} failed: {done.stdout[-2000:]!r} {done.stderr[-2000:]!r}"
            )

    if not (python_dir / "Lib" / "site-packages" / "PyInstaller").is_dir():
        shutil.rmtree(PYINSTALLER_BUILD, ignore_errors=True)
        shutil.copytree(LANE.interpreter, python_dir)
        (python_dir / "_wmi.pyd").unlink(missing_ok=True)
        pth = python_dir / "python313._pth"
        pth.write_text(pth.read_text() + "import site\n")
        wheels = PYINSTALLER_BUILD / "pip"
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                        str(wheels), "pip"], check=True)  # fmt: skip
        (pip,) = wheels.glob("pip-*.whl")
        run(windows_path(pip) + "/pip", "install", "-q", "pyinstaller>=6,<7")
    spec = Path(__file__).resolve().parent.parent / "packaging" / "pedelec-native-host.spec"
    run("-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
        "--distpath", windows_path(PYINSTALLER_BUILD / "dist"),
        "--workpath", windows_path(PYINSTALLER_BUILD / "work"), windows_path(spec))  # fmt: skip
    return exe


def installed_executable(folder: str) -> str:
    """The installed MSI's executable: in the version folder `current` names (issue 30), or
    in the install folder itself (an MSI from before, measured for a comparison)."""
    current = linux_path(folder) / versions.CURRENT
    if current.is_file():
        folder = f"{folder}\\{current.read_text().strip()}"
    return f"{folder}\\pedelec-native-host.exe"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pyinstaller", type=Path, metavar="EXE",
                        help="a PyInstaller onedir build's .exe to measure too")  # fmt: skip
    parser.add_argument("--build-pyinstaller", action="store_true",
                        help=f"build one under Wine first (in {PYINSTALLER_BUILD})")  # fmt: skip
    parser.add_argument("--json", type=Path, metavar="FILE")
    parser.add_argument("--msi", type=Path, metavar="MSI",
                        help=f"the per-user MSI to measure (default: {msi.DIST}'s)")  # fmt: skip
    args = parser.parse_args(argv)
    runs = args.runs or DEFAULT_RUNS["quick" if args.quick else "full"]
    problem = lane_problem()
    if problem is not None:
        print(f"Windows lane: {problem}", file=sys.stderr)
        return 1
    if args.build_pyinstaller:
        print(f"building the PyInstaller onedir bundle under Wine in {PYINSTALLER_BUILD}")
        args.pyinstaller = build_pyinstaller()
    package = args.msi or msi.msi_in(msi.DIST, msi.PER_USER)
    if package is None or msi.products():
        print(f"need the per-user MSI in {msi.DIST} and none installed: {msi.BUILD_IT}",
              file=sys.stderr)  # fmt: skip
        return 1
    buckets = Path("/proc/sys/net/ipv4/tcp_max_tw_buckets")
    if buckets.exists() and buckets.read_text().strip() != "0":
        print("warning: this network namespace keeps TIME_WAIT sockets: under Wine each one")
        print("  slows the host's peer check, sample after sample (run it as .ci/run does)")
    load = os.getloadavg()[0]
    print(f"Windows start-up under Wine ({runs} rounds, load {load:.2f}): {package.name},")
    print("  against bench/relay_host.py run by the lane's Windows CPython with -I -S")
    with tempfile.TemporaryDirectory(dir=LANE.root) as scratch:
        root = Path(scratch)
        dirs = {name: root / name for name in ("home", "config", "state", "logs")}
        for directory in dirs.values():
            directory.mkdir()
        (dirs["config"] / "config.json").write_text('{"checkRuntimePid": false}')
        env = wine_environment({
            "PEDELEC_HOME": windows_path(dirs["home"]),
            "PEDELEC_NATIVE_HOST_CONFIG_DIR": windows_path(dirs["config"]),
            "PEDELEC_NATIVE_HOST_STATE_DIR": windows_path(dirs["state"]),
            "PEDELEC_NATIVE_HOST_LOG_DIR": windows_path(dirs["logs"]),
        })  # fmt: skip
        core = DevCore(DevCoreSettings(home=dirs["home"]))
        core.start()
        # One Wine server for the whole run (it would otherwise stop 3 s after each
        # sample's last process and start again with the next).
        subprocess.run(["wineserver", "-p"], env=env, check=False)
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(["wineboot"], env=env, stdin=subprocess.DEVNULL, check=False, **quiet)
        installed = msi.install(package)
        if installed.returncode != 0:
            print(f"msiexec /i failed: {installed.stderr!r}", file=sys.stderr)
            return 1
        started = time.monotonic()
        try:
            profile = subprocess.run(
                ["wine", str(LANE.python), "-c", "import os; print(os.environ['USERPROFILE'])"],
                capture_output=True, text=True, env=env, stdin=subprocess.PIPE, check=True,
            ).stdout.strip()  # fmt: skip
            executable = installed_executable(msi.install_dir(profile))
            rows = measure(variants(root, executable, args.pyinstaller), env, runs)
        finally:
            subprocess.run(["wineserver", "-k"], env=env, check=False)
            msi.uninstall(package)
            # The Wine server makes every socket of its programs, in the network namespace
            # it started in: one left running would serve the next run's from this one.
            subprocess.run(["wineserver", "-k"], env=env, check=False)
            core.stop()
    print(f"\n({time.monotonic() - started:.0f} s; load {os.getloadavg()[0]:.2f} at the end)")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
