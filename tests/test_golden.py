"""The conformance suite: the spec's golden exchanges (sections 8 and 9.9), played from
data files in tests/fixtures/golden/ through the real host process against the dev Core.

Each fixture lists steps: frames the extension sends, frames it must receive, Core
requests the dev Core must have recorded, and things the Core does (emit, inject,
close, crash, restart). Expected JSON is compared parsed; placeholders:
"<string>" any string, "<int>" any integer, "<any>" anything, "<HOME>" the Pedelec
home and "<DIR>" a real directory made for the fixture. Every frame of every run is
checked against the 1 MiB cap by `HostProcess`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from native_host.errors import ALL_STAGES
from tests.support.host_os import (
    host_path,
    host_separator,
    remove_desktop_app,
    stop_process,
    write_desktop_app,
)
from tests.support.runtime import free_port, write_runtime
from tests.support.world import HostWorld

pytestmark = pytest.mark.process

FIXTURES = Path(__file__).parent / "fixtures" / "golden"
STEP_DEADLINE_S = 30.0
"""How long a step waits for a frame or a Core line: a bound, not a speed. Generous,
because a host under Wine on a loaded machine takes seconds to start and to check the
Core's listener (a first Core line once took more than 10 s in `.ci/run`)."""


def _cases() -> list[Any]:
    cases = []
    for path in sorted(FIXTURES.glob("*.json")):
        fixture = json.loads(path.read_text())
        for generation in fixture.get("generations", ["legacy"]):
            cases.append(pytest.param(path, generation, id=f"{path.stem}[{generation}]"))
    return cases


def _substitute(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, replacement in names.items():
            value = value.replace(name, replacement)
        return value
    if isinstance(value, list):
        return [_substitute(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, names) for k, v in value.items()}
    return value


def matches(expected: Any, actual: Any) -> bool:
    """Parsed-JSON equality with placeholders (spec 8, notation)."""
    if expected == "<any>":
        return True
    if expected == "<string>":
        return isinstance(actual, str)
    if expected == "<int>":
        return isinstance(actual, int) and not isinstance(actual, bool)
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(matches(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return type(expected) is type(actual) and expected == actual


def build_body(spec: Any) -> bytes:
    """A frame body from text, or from parts `[{"text": s} | {"repeat": s, "count": n}]`."""
    if isinstance(spec, str):
        return spec.encode()
    return b"".join(
        p["text"].encode() if "text" in p else p["repeat"].encode() * p["count"] for p in spec
    )


class Player:
    """Plays one fixture against one world."""

    def __init__(self, world: HostWorld, fixture: dict[str, Any], generation: str) -> None:
        self.world = world
        self.fixture = fixture
        self.generation = generation
        self.directory = world.root / "workspace"
        self.directory.mkdir()
        home = host_path(world.home)
        # The host names its files its own way (Windows: Z:\...\app-launch.json).
        self.names = {"<HOME>/": home + host_separator(), "<HOME>": home}
        self.names["<DIR>"] = str(self.directory)
        self.core: Any = None
        self.core_seen = 0
        self.core_matched: set[int] = set()
        self.connections_mark = 0
        self.host: Any = None
        self.app: Path | None = None

    def sub(self, value: Any) -> Any:
        return _substitute(value, self.names)

    def setup(self) -> None:
        fixture = self.fixture
        if "config" in fixture:
            self.world.write_config(fixture["config"])
        if "policy" in fixture:
            self.world.write_policy(fixture["policy"])
        if "policyText" in fixture:
            (self.world.config_dir / "origins.json").write_text(fixture["policyText"])
        if "configText" in fixture:
            (self.world.config_dir / "config.json").write_text(fixture["configText"])
        if fixture.get("launchApp"):
            self.write_launch_app(fixture["launchApp"])
        if "launchConfig" in fixture:
            config = self.sub(fixture["launchConfig"])
            (self.world.home / "app-launch.json").write_text(json.dumps(config))
        if fixture.get("runtime") == "closed-port":
            self.write_closed_port_runtime()
        if fixture.get("core", True) is not False:
            faults = self.sub(fixture.get("core", {}).get("faults", {}))
            self.core = self.world.start_core(self.generation, **faults)
        self.host = self.world.start_host(args=fixture.get("hostArgs"), **fixture.get("env", {}))

    def write_closed_port_runtime(self) -> None:
        write_runtime(self.world.home, free_port(), os.getpid())

    def write_launch_app(self, kind: str) -> None:
        """A desktop app for app-launch.json: `marker` only leaves a file behind, `devcore`
        starts a dev Core on the home (the launched Core is killed at teardown)."""
        core = None
        if kind == "devcore":
            record = self.world.root / "launched-core-record.jsonl"
            core = ["--home", str(self.world.home), "--generation", self.generation,
                    "--record", str(record)]  # fmt: skip
        app, marker = write_desktop_app(self.world.root, self.world.home, core)
        self.app = app
        self.names["<MARKER>"] = str(marker)
        self.names["<APP>"] = host_path(app)

    def teardown(self) -> None:
        runtime = self.world.home / "runtime.json"
        if self.fixture.get("launchApp") == "devcore" and runtime.exists():
            with contextlib.suppress(OSError, ValueError, KeyError):
                stop_process(json.loads(runtime.read_text())["pid"])
        if self.app is not None:
            remove_desktop_app(self.app)

    # --- steps ------------------------------------------------------------------------
    def run(self) -> None:
        for index, step in enumerate(self.fixture["steps"]):
            (name, arg), *rest = step.items()
            assert not rest, f"step {index} has more than one action: {step}"
            handler = getattr(self, "step_" + name)
            try:
                handler(self.sub(arg))
            except AssertionError as exc:
                raise AssertionError(f"step {index} {name}: {exc}") from None

    def step_send(self, message: Any) -> None:
        self.host.send(message)

    def step_sendBody(self, spec: Any) -> None:
        self.host.send_body(build_body(spec))

    def step_sendFrame(self, spec: dict[str, Any]) -> None:
        """A prefix declaring `declared` bytes followed by `body` (possibly shorter)."""
        body = build_body(spec.get("body", ""))
        declared = spec.get("declared", len(body))
        self.host.send_raw(declared.to_bytes(4, "little") + body)

    def read(self) -> dict[str, Any]:
        """The next frame; every host-made error in it must name a known stage (7.4)."""
        frame = self.host.read(timeout=STEP_DEADLINE_S)
        error = frame.get("error") or frame.get("event", {}).get("error")
        if isinstance(error, dict) and isinstance(error.get("details"), dict):
            stage = error["details"].get("stage")
            assert stage is None or stage in ALL_STAGES, f"unknown stage in {frame}"
        return frame

    def step_expect(self, expected: Any) -> None:
        actual = self.read()
        assert matches(expected, actual), f"\nexpected {expected}\n  actual {actual}"

    def step_expectAnyOrder(self, expected: list[Any]) -> None:
        actual = [self.read() for _ in expected]
        remaining = list(actual)
        for item in expected:
            found = next((a for a in remaining if matches(item, a)), None)
            assert found is not None, f"\nno frame matches {item}\n frames {actual}"
            remaining.remove(found)

    def step_expectInterleaved(self, arg: dict[str, Any]) -> None:
        """`ordered` frames must arrive in order; `floating` ones anywhere among them."""
        ordered, floating = list(arg.get("ordered", [])), list(arg.get("floating", []))
        actual = [self.read() for _ in range(len(ordered) + len(floating))]
        rest = []
        for frame in actual:
            found = next((f for f in floating if matches(f, frame)), None)
            if found is not None:
                floating.remove(found)
            else:
                rest.append(frame)
        assert not floating, f"\nmissing {floating}\n frames {actual}"
        for expected, frame in zip(ordered, rest, strict=True):
            assert matches(expected, frame), f"\nexpected {expected}\n  actual {frame}"

    def step_expectRecordFile(self, arg: dict[str, Any]) -> None:
        """Count lines of one type in the record of a dev Core started by a launch."""
        path = self.world.root / "launched-core-record.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        types = [json.loads(line).get("type") for line in lines]
        assert types.count(arg["type"]) == arg["count"], types

    def step_expectSilence(self, seconds: float) -> None:
        assert self.host.no_frame_within(seconds), f"unexpected frame {self.host.read()}"

    def _records(self) -> list[Any]:
        return self.core.record if self.core is not None else []

    def step_expectCore(self, expected: Any) -> None:
        """The Core received a line matching `expected` (requests on separate connections
        carry no ordering guarantee, spec 7.1, so any not-yet-matched line counts)."""
        deadline = time.monotonic() + STEP_DEADLINE_S
        while True:
            records = self._records()
            for index in range(self.core_seen, len(records)):
                if index not in self.core_matched and matches(expected, records[index].envelope):
                    self.core_matched.add(index)
                    return
            if time.monotonic() > deadline:
                raw = [r.raw[:300] for r in records[self.core_seen :]]
                raise AssertionError(f"\nno Core line matches {expected}\n lines {raw}")
            time.sleep(0.01)

    def step_expectCoreTotal(self, count: int) -> None:
        time.sleep(0.05)
        records = self._records()
        assert len(records) == count, [r.raw for r in records]

    def step_markConnections(self, _: Any) -> None:
        """Start counting Core connections and requests from here."""
        self.connections_mark = self.core.connection_count if self.core else 0
        self.core_seen = len(self._records())

    def step_expectNoCoreTraffic(self, _: Any) -> None:
        time.sleep(0.05)
        count = self.core.connection_count if self.core else 0
        assert count == self.connections_mark, f"{count - self.connections_mark} connections"
        assert len(self._records()) == self.core_seen, "the Core received requests"

    def step_expectNewConnections(self, count: int) -> None:
        assert self.core.connection_count - self.connections_mark == count
        self.connections_mark = self.core.connection_count

    def step_coreEmit(self, arg: dict[str, Any]) -> None:
        self.core.emit_event(arg["threadId"], arg["event"])

    def step_coreInject(self, arg: dict[str, Any]) -> None:
        self.core.inject_stream_line(arg["threadId"], build_body(arg["line"]))

    def step_coreOpenGate(self, _: Any) -> None:
        """Release what the `gateTypes` / `gateStreamEvents` faults hold."""
        self.core.open_gate()

    def step_coreCloseStreams(self, thread_id: str | None) -> None:
        self.core.close_streams(thread_id)

    def step_coreCrash(self, _: Any) -> None:
        self.core.crash()

    def step_coreRestart(self, faults: dict[str, Any]) -> None:
        """A new Core process on a new port rewrites runtime.json."""
        self.core = self.world.start_core(self.generation, **faults)
        self.core_seen = 0
        self.core_matched = set()
        self.connections_mark = 0

    def step_expectStreamEof(self, arg: dict[str, Any]) -> None:
        thread_id, count = arg.get("threadId"), arg.get("count", 1)
        deadline = time.monotonic() + 5
        while self.core.stream_eofs(thread_id) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.core.stream_eofs(thread_id) == count

    def step_expectFile(self, arg: dict[str, Any]) -> None:
        exists = Path(arg["path"]).exists()
        assert exists == arg.get("exists", True), f"{arg['path']} exists={exists}"

    def step_closeStdin(self, _: Any) -> None:
        self.host.close_stdin()

    def step_expectExit(self, arg: dict[str, Any]) -> None:
        started = time.monotonic()
        code = self.host.wait(timeout=arg.get("within", 2.0) + 3)
        elapsed = time.monotonic() - started
        assert code == arg["code"], f"exit {code}; stderr {self.host.stderr}"
        assert elapsed <= arg.get("within", 2.0), f"exit took {elapsed:.2f} s"

    def step_expectEof(self, _: Any) -> None:
        with pytest.raises(EOFError):
            self.host.read(timeout=5)

    def step_sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@pytest.mark.parametrize(("path", "generation"), _cases())
def test_golden_exchange(world: HostWorld, path: Path, generation: str) -> None:
    fixture = json.loads(path.read_text())
    player = Player(world, fixture, generation)
    player.setup()
    try:
        player.run()
        player.host.check_protocol()
    finally:
        player.teardown()
