"""Benchmarks of the host, each reported as a ratio against a baseline measured in the
same run on the same machine (these machines are shared and noisy: absolute numbers mean
little, ratios measured side by side do).

- cold start: spawn -> `ping` answered through the Core -> EOF -> exit, for the host
  versus a minimal Python relay that does only that (same interpreter, same dev Core);
- round trips: sequential pings on one open port, host versus talking to the Core directly;
- concurrency: 32 requests the Core answers after 200 ms, host versus the serial sum;
- memory: peak RSS of the host after a session versus the minimal relay.

Usage: python bench/run.py [--runs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from native_host.devcore import DevCore, DevCoreSettings, Faults
from native_host.hostproc import OFFICIAL_ORIGIN, HostProcess, isolated_env

MINIMAL_RELAY = r"""
import json, socket, struct, sys
home = sys.argv[1]
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
while True:
    prefix = stdin.read(4)
    if len(prefix) < 4:
        break
    request = json.loads(stdin.read(struct.unpack("<I", prefix)[0]))
    runtime = json.load(open(home + "/runtime.json"))
    with socket.create_connection(("127.0.0.1", runtime["port"])) as core:
        core.sendall(json.dumps({"requestId": request["requestId"], "type": "ping",
                                 "payload": {}}).encode() + b"\n")
        reply = json.loads(core.makefile("rb").readline())
    body = json.dumps({"type": "response", "requestId": request["requestId"],
                       "ok": True, "result": reply["result"]}).encode()
    stdout.write(struct.pack("<I", len(body)) + body)
    stdout.flush()
"""


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack("<I", len(body)) + body


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cold_start(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Seconds from spawn to a clean exit after one ping, and the peak RSS in KiB."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(frame({"type": "ping", "requestId": "bench"}))
    proc.stdin.flush()
    size = struct.unpack("<I", proc.stdout.read(4))[0]
    reply = json.loads(proc.stdout.read(size))
    assert reply["ok"], reply
    rss = peak_rss_kib(proc.pid)
    proc.stdin.close()
    assert proc.wait(10) == 0
    return time.perf_counter() - started, rss


def direct_ping(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as core:
        core.sendall(b'{"requestId":"d","type":"ping","payload":{}}\n')
        assert json.loads(core.makefile("rb").readline())["ok"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"python": sys.version.split()[0], "runs": args.runs}
    with tempfile.TemporaryDirectory() as root:
        env = isolated_env(os.environ, root)
        home = Path(env["PEDELEC_HOME"])
        home.mkdir(parents=True)
        slow = Faults(
            delay_ms={"send_text": 200},
            canned_responses={"send_text": {"ok": True, "result": {"threadId": "t1"}}},
        )
        with DevCore(DevCoreSettings(home=home, generation="current", faults=slow)) as core:
            host_cmd = [sys.executable, "-m", "native_host", OFFICIAL_ORIGIN]
            base_cmd = [sys.executable, "-c", MINIMAL_RELAY, str(home)]
            host_runs, base_runs, host_rss, base_rss = [], [], [], []
            for _ in range(args.runs):
                seconds, rss = cold_start(base_cmd, env)
                base_runs.append(seconds)
                base_rss.append(rss)
                seconds, rss = cold_start(host_cmd, env)
                host_runs.append(seconds)
                host_rss.append(rss)
            results["cold_start_ms"] = {
                "host": statistics.median(host_runs) * 1000,
                "minimal_relay": statistics.median(base_runs) * 1000,
            }
            results["peak_rss_kib"] = {
                "host": statistics.median(host_rss),
                "minimal_relay": statistics.median(base_rss),
            }

            pings = args.runs * 20
            started = time.perf_counter()
            for _ in range(pings):
                direct_ping(core.port)
            direct = (time.perf_counter() - started) / pings
            with HostProcess(env=env) as host:
                host.request({"type": "ping", "requestId": "warm"})
                started = time.perf_counter()
                for i in range(pings):
                    host.request({"type": "ping", "requestId": f"p{i}"})
                relayed = (time.perf_counter() - started) / pings
                started = time.perf_counter()
                for i in range(32):
                    host.send(
                        {
                            "type": "send_text",
                            "requestId": f"s{i}",
                            "threadId": "t1",
                            "message": "x",
                        }
                    )
                for _ in range(32):
                    host.read(timeout=30)
                concurrent = time.perf_counter() - started
            results["round_trip_ms"] = {"host": relayed * 1000, "direct_to_core": direct * 1000}
            results["concurrency_32x200ms_s"] = {"host": concurrent, "serial": 32 * 0.2}

    rows = [
        ("cold start, ping, exit", "cold_start_ms", "host", "minimal_relay"),
        ("peak RSS (KiB)", "peak_rss_kib", "host", "minimal_relay"),
        ("round trip on an open port", "round_trip_ms", "host", "direct_to_core"),
        ("32 requests of 200 ms (s)", "concurrency_32x200ms_s", "host", "serial"),
    ]
    print(f"{'benchmark':<30} {'host':>10} {'baseline':>10} {'ratio':>7}  baseline")
    for label, key, ours, base in rows:
        value, reference = results[key][ours], results[key][base]
        results[key]["ratio"] = value / reference
        print(f"{label:<30} {value:>10.2f} {reference:>10.2f} {value / reference:>7.2f}  {base}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
