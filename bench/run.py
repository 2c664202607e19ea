"""The five figures of issue 14, each against a baseline measured in the same run.

(1) cold start, spawn -> `ping` answered through the dev Core; (2) the same through real
headless Chromium, connectNative -> ping answered; (3) host CPU per relayed event at
200 B and 512 KiB; (4) idle and high-water RSS; (5) bundle and venv size. The host is
the wheel-installed venv (and every `--bundle`). The start-up baseline of (1) and (2) is
`bench/relay_host.py`, the minimal relay (built-in modules, no threads, no checks); the
baseline of (3) and (4) is `bench/echo_host.py`, which also streams; both run with
`python -I -S`. Rounds interleave hosts and baselines (rotating the order each round),
and ratios are taken per round, so a shared machine's drift cancels. See
bench/README.md and docs/performance.md.

Usage: python3 bench/run.py [--runs N] [--quick] [--bundle [LABEL=]PATH]... [--only FIGURE...]
                           [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.*, tests.e2e.*

from bench import builds, processes
from bench.builds import Variant
from bench.stats import Summary, Target, fmt, paired_ratios, row, summarize
from native_host.devcore import DevCore, DevCoreSettings
from tests.support.checkout import permanent_directory

TARGETS = {
    "start_vs_relay": Target(1.10, "x"),
    "frozen_vs_venv": Target(1.0, "x"),
    "cpu_small_us": Target(4.0, "us"),
    "cpu_large_ms": Target(0.8, "ms"),
    "idle_rss_vs_echo": Target(1.15, "x"),
    "hwm_vs_echo": Target(2.0, "x"),
    "bundle_vs_venv_size": Target(1.0, "x"),
}
"""The issue's targets."""
SMALL_BYTES = 200
LARGE_BYTES = 512 * 1024
EVENTS = {"full": (20_000, 200), "quick": (5_000, 50)}
"""Events per flood (200 B, 512 KiB): enough that the host's per-event CPU dwarfs the
noise of its start-up, which the idle session subtracts."""
DEFAULT_RUNS = {"full": 20, "quick": 5}
FIGURES = ("1", "2", "3", "4", "5")
CONFIG_FILE_LABEL = "venv, with a config.json"
CI_BUNDLE = "dist/pedelec-native-host/pedelec-native-host"

T = TypeVar("T")


def rounds(
    variants: Sequence[Variant], runs: int, measure: Callable[[Variant], T]
) -> dict[str, list[T]]:
    """`runs` rounds of every variant, the order rotated each round."""
    samples: dict[str, list[T]] = {v.label: [] for v in variants}
    for index in range(runs):
        shift = index % len(variants)
        for variant in [*variants[shift:], *variants[:shift]]:
            samples[variant.label].append(measure(variant))
    return samples


class Report:
    """Rows, printed as they are made and kept for --json."""

    def __init__(self, bundles: int) -> None:
        self.rows: list[dict[str, Any]] = []
        self.not_measured: list[str] = []
        self.bundles = bundles

    def section(self, title: str) -> None:
        """Start a figure; say at once when the bundle's rows will be missing from it."""
        print(f"\n{title}")
        if not self.bundles:
            self.missing("bundle", f"no --bundle PATH (CI builds it at {CI_BUNDLE})")

    def add(self, line: dict[str, Any]) -> None:
        self.rows.append(line)
        value, unit = line["value"], line["unit"]
        text = f"  {line['label']:<34} {fmt(value)} {unit}"
        if line["baseline"] is not None:
            text += f"   baseline {fmt(line['baseline'])}"
        if line["ratio"] is not None:
            text += f"   ratio {fmt(line['ratio'], 'x')}"
        if line["target"] is not None:
            text += f"   target {line['target']}: {line['verdict']}"
        print(text)

    def missing(self, what: str, why: str) -> None:
        self.not_measured.append(f"{what}: {why}")
        print(f"  {what:<34} NOT MEASURED: {why}")


def _ratio_rows(
    report: Report,
    samples: dict[str, list[float]],
    unit: str,
    baseline: str,
    hosts: Sequence[str],
    target: Target | None,
) -> None:
    base = samples[baseline]
    for label in hosts:
        ratio = summarize(paired_ratios(samples[label], base))
        report.add(row(label, summarize(samples[label]), unit, summarize(base), ratio, target))


def _frozen_rows(
    report: Report, samples: dict[str, list[float]], unit: str, bundles: Sequence[str]
) -> None:
    for label in bundles:
        ratio = summarize(paired_ratios(samples[label], samples["venv"]))
        line = row(
            f"{label} vs venv",
            summarize(samples[label]),
            unit,
            summarize(samples["venv"]),
            ratio,
            TARGETS["frozen_vs_venv"],
        )
        report.add(line)


def cold_start(
    report: Report,
    variants: Sequence[Variant],
    env: dict[str, str],
    config_env: dict[str, str],
    runs: int,
) -> dict[str, list[float]]:
    """Figure (1), plus the venv host with a config.json (no target: it shows what
    reading the file costs every start). Milliseconds per variant."""
    report.section("(1) cold start: spawn -> ping answered through the dev Core, ms")
    venv = next(v for v in variants if v.label == "venv")
    config_variant = Variant(CONFIG_FILE_LABEL, venv.command)
    everything = [*variants, config_variant]

    def measure(variant: Variant) -> float:
        chosen = config_env if variant.label == CONFIG_FILE_LABEL else env
        return processes.spawn_to_ping(variant.command, chosen) * 1000

    rounds(everything, 1, measure)  # warm-up: page cache, dev Core threads
    samples = rounds(everything, runs, measure)
    hosts = [v.label for v in variants if not v.baseline]
    _ratio_rows(report, samples, "ms", "relay", hosts, TARGETS["start_vs_relay"])
    _frozen_rows(report, samples, "ms", [h for h in hosts if h != "venv"])
    _ratio_rows(report, samples, "ms", "relay", ["echo", CONFIG_FILE_LABEL], None)
    return samples


def browser_start(
    report: Report, variants: Sequence[Variant], venv: Path, root: Path, runs: int
) -> dict[str, Any]:
    """Figure (2); {} when there is no Chromium (main() fails that in CI)."""
    report.section("(2) real headless Chromium: connectNative -> ping answered, ms")
    from tests.e2e import harness

    chromium = harness.find_chromium()
    if chromium is None:
        report.missing("all variants", "no chromium on PATH (apt-get install -y chromium)")
        return {}
    from bench.browser import FAILED, BrowserBench

    bench = BrowserBench(chromium, root, venv / "bin" / "pedelec-native-host")
    paths = {v.label: v.command[0] for v in variants}
    paths["venv"] = bench.launcher
    try:
        bench.connect_to_ping(paths["relay"])  # warm-up: extension, page cache
        both = rounds(variants, runs, lambda v: bench.connect_to_ping(paths[v.label]))
    except FAILED as failure:
        raise RuntimeError(f"the browser run failed: {failure}") from None
    finally:
        bench.close()
    second = {label: [b * 1000 for _, b in pairs] for label, pairs in both.items()}
    hosts = [v.label for v in variants if not v.baseline]
    _ratio_rows(report, second, "ms", "relay", hosts, TARGETS["start_vs_relay"])
    _frozen_rows(report, second, "ms", [h for h in hosts if h != "venv"])
    _ratio_rows(report, second, "ms", "relay", ["echo"], None)
    return {
        "chromium": harness.chromium_version(chromium),
        "second_connect_ms": second,
        "first_connect_ms": {k: [a * 1000 for a, _ in v] for k, v in both.items()},
    }


def floods(
    report: Report,
    variants: Sequence[Variant],
    env: dict[str, str],
    core: DevCore,
    runs: int,
    counts: tuple[int, int],
) -> dict[str, Any]:
    """Figures (3) and (4): three host lifetimes per variant and round (idle, small and
    large flood), so that per-event CPU is taken against an idle session of the same round.
    The minimal relay does not stream: the echo is the baseline here."""
    small, large = counts
    variants = [v for v in variants if v.label != "relay"]

    def measure(variant: Variant) -> dict[str, processes.Session]:
        return {
            "idle": processes.session(variant.command, env, core, SMALL_BYTES, 0),
            "small": processes.session(variant.command, env, core, SMALL_BYTES, small),
            "large": processes.session(variant.command, env, core, LARGE_BYTES, large),
        }

    results = rounds(variants, runs, measure)
    cpu_small = {
        k: [(s["small"].cpu_s - s["idle"].cpu_s) / small * 1e6 for s in v]
        for k, v in results.items()
    }
    cpu_large = {
        k: [(s["large"].cpu_s - s["idle"].cpu_s) / large * 1e3 for s in v]
        for k, v in results.items()
    }
    idle = {k: [s["idle"].idle_rss_kib / 1024 for s in v] for k, v in results.items()}
    hwm = {
        k: [max(s["small"].hwm_kib, s["large"].hwm_kib) / 1024 for s in v]
        for k, v in results.items()
    }
    hosts = [v.label for v in variants if not v.baseline]

    report.section("(3) host CPU per relayed event (user+sys, flood minus idle session)")
    for label in hosts:
        for samples, unit, size, target in (
            (cpu_small, "us", f"{SMALL_BYTES} B x {small}", TARGETS["cpu_small_us"]),
            (cpu_large, "ms", f"512 KiB x {large}", TARGETS["cpu_large_ms"]),
        ):
            ratio = summarize(paired_ratios(samples[label], samples["echo"]))
            line = row(
                f"{label}, {size}",
                summarize(samples[label]),
                unit,
                summarize(samples["echo"]),
                ratio,
                target,
            )
            report.add(line)
    report.section("(4) memory, MiB: idle RSS after the first answer; high-water after the floods")
    for label in hosts:
        for samples, what, target in (
            (idle, "idle RSS", TARGETS["idle_rss_vs_echo"]),
            (hwm, "high-water RSS", TARGETS["hwm_vs_echo"]),
        ):
            ratio = summarize(paired_ratios(samples[label], samples["echo"]))
            report.add(
                row(
                    f"{label}, {what}",
                    summarize(samples[label]),
                    "MiB",
                    summarize(samples["echo"]),
                    ratio,
                    target,
                )
            )
    return {
        "cpu_per_event_small_us": cpu_small,
        "cpu_per_event_large_ms": cpu_large,
        "idle_rss_mib": idle,
        "high_water_rss_mib": hwm,
        "sessions": {
            k: [{n: s._asdict() for n, s in r.items()} for r in v] for k, v in results.items()
        },
    }


def sizes(report: Report, venv: Path, bundles: dict[str, Path]) -> dict[str, Any]:
    """Figure (5): what users download and keep on disk."""
    report.section("(5) size on disk, MiB (apparent size of every file)")
    venv_bytes = builds.venv_sizes(venv)
    venv_mib = venv_bytes["total"] / 2**20
    point = Summary.single
    report.add(row("venv (as install.sh makes it)", point(venv_mib), "MiB"))
    lean = venv_bytes["without_pip_setuptools"] / 2**20
    report.add(row("venv without pip and setuptools", point(lean), "MiB"))
    found = {}
    for label, executable in bundles.items():
        mib = builds.tree_bytes(executable.parent) / 2**20
        found[label] = mib
        report.add(
            row(
                label,
                point(mib),
                "MiB",
                point(venv_mib),
                point(mib / venv_mib),
                TARGETS["bundle_vs_venv_size"],
            )
        )
    return {"venv_bytes": venv_bytes, "bundle_mib": found}


def parse_bundles(values: Sequence[str]) -> dict[str, Path]:
    """`[LABEL=]PATH` arguments: labels "bundle", "bundle 2", ... unless given."""
    found: dict[str, Path] = {}
    for index, value in enumerate(values, start=1):
        label, sep, path = value.partition("=")
        if not sep:
            label, path = ("bundle" if index == 1 else f"bundle {index}"), value
        elif not label.startswith("bundle"):
            label = f"bundle {label}"
        found[label] = Path(path).resolve()
    return found


def meta(runs: int, mode: str, counts: tuple[int, int]) -> dict[str, Any]:
    """What a reader needs to judge the numbers: machine, load, commit, settings."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=builds.REPO,
        check=False,
    )
    return {
        "python": sys.version.split()[0],
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_at_start": os.getloadavg(),
        "commit": commit.stdout.strip() or None,
        "runs": runs,
        "mode": mode,
        "events_per_flood": {"200 B": counts[0], "512 KiB": counts[1]},
    }


def print_header(info: dict[str, Any]) -> None:
    """The run's settings and exactly what the baseline does, before any figure."""
    load = info["load_average_at_start"][0]
    print(f"pedelec-native-host bench ({info['mode']}, {info['runs']} rounds, load {load:.2f})")
    print(f"  {info['machine']}, Python {info['python']}, commit {info['commit']}")
    print("baselines, under `python -I -S` (this interpreter), checking nothing (no validation,")
    print("  policy, limits or log):")
    print("  'relay' (figures 1, 2): bench/relay_host.py, the minimal relay: built-in modules")
    print("    (_socket, os, struct, sys) and json, no threads; per request it reads")
    print("    runtime.json, asks the Core on a fresh connection and writes the answer back;")
    print("  'echo' (figures 3, 4; a line in 1, 2): bench/echo_host.py, the same with `socket`")
    print("    and `_thread`, and a subscribe forwards every stream line (json decode + encode).")


def make_variants(
    root: Path, venv: Path, env: dict[str, str], bundles: dict[str, Path]
) -> list[Variant]:
    """relay, echo, venv (the launcher its `install` registers) and every bundle."""
    launcher = builds.registered_path(venv / "bin" / "pedelec-native-host", env, root / "profile")
    variants = [
        Variant("relay", (str(builds.relay_executable(root)),), baseline=True),
        Variant("echo", (str(builds.echo_executable(root)),), baseline=True),
        Variant("venv", (launcher,)),
    ]
    variants += [Variant(label, (str(path),)) for label, path in bundles.items()]
    return variants


def with_config_file(env: dict[str, str], config_dir: Path) -> dict[str, str]:
    """`env` with a config dir holding a `config.json` (what `install --extension-id`
    writes): a host that finds one reads it with pydantic. (The directory comes from
    PEDELEC_NATIVE_HOST_CONFIG_DIR; the other dirs still come from platformdirs.)"""
    config_dir.mkdir()
    (config_dir / "config.json").write_text('{"allowedExtensionIds": []}\n')
    return {**env, "PEDELEC_NATIVE_HOST_CONFIG_DIR": str(config_dir)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--runs", type=int, help="interleaved rounds per figure (default 15, quick 5)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds and events, for CI")
    parser.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="[LABEL=]PATH",
        help=f"a PyInstaller onedir executable (CI: {CI_BUNDLE}); repeatable",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=FIGURES,
        default=FIGURES,
        metavar="FIGURE",
        help="measure only these figures (1-5; 3 and 4 come from the same sessions)",
    )
    parser.add_argument(
        "--json", type=Path, metavar="FILE", help="write every figure and sample here"
    )
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    runs = args.runs or DEFAULT_RUNS[mode]
    counts = EVENTS[mode]
    bundles = parse_bundles(args.bundle)
    for label, path in bundles.items():
        if not os.access(path, os.X_OK):
            parser.error(f"{label}: {path} is not an executable")
    started = time.monotonic()
    report = Report(len(bundles))
    results: dict[str, Any] = {"meta": meta(runs, mode, counts)}
    print_header(results["meta"])
    with (
        tempfile.TemporaryDirectory(prefix="pedelec-bench-") as temp,
        permanent_directory() as lasting,
    ):
        root = Path(temp)
        venv, build_s = builds.build_wheel_venv(root / "build", lasting / "venv")
        print(f"venv: a wheel of this checkout, installed into a fresh venv in {build_s:.1f} s")
        env = processes.user_env(os.environ, root / "world")
        home = processes.pedelec_home(env)
        variants = make_variants(root, venv, env, bundles)
        with DevCore(DevCoreSettings(home=home, generation="current")) as core:
            config_env = with_config_file(env, root / "config-with-file")
            if "1" in args.only:
                results["cold_start_ms"] = cold_start(report, variants, env, config_env, runs)
            if "2" in args.only:
                results["chromium"] = browser_start(report, variants, venv, root / "browser", runs)
            if {"3", "4"} & set(args.only):
                results["events"] = floods(report, variants, env, core, runs, counts)
        if "5" in args.only:
            results["sizes"] = sizes(report, venv, bundles)
    results["figures"] = report.rows
    results["not_measured"] = report.not_measured
    results["meta"]["seconds"] = time.monotonic() - started
    results["meta"]["load_average_at_end"] = os.getloadavg()
    print(
        f"\ndone in {results['meta']['seconds']:.0f} s; load average now {os.getloadavg()[0]:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if os.environ.get("CI") == "true" and "chromium" in results and not results["chromium"]:
        print("CI=true but no chromium: figure (2) must be measured in CI", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
