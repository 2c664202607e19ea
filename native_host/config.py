"""Host configuration: `config.json` plus environment overrides (spec 7.16).

Every setting is a row of `SETTINGS`: its JSON key, environment variable, type and
bounds. Parsing is strict (ASCII digits only, bounds enforced) and never crashes: a
bad environment value is reported and ignored, an invalid file is reported and the
defaults apply (then only the official extension is allowed). `problems` carries the
reports to the log and to `doctor`, which reads the file through this same function.

No pydantic and no dataclasses here: every host start reads this file.
"""

from __future__ import annotations

import os

from native_host import codec, files, paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_CONFIG_BYTES = 262_144
LOG_LEVELS = ("info", "debug", "trace")
_DIGITS = frozenset("0123456789")


class Setting:
    """One row of the settings table."""

    __slots__ = ("attr", "default", "env", "high", "key", "low")

    def __init__(
        self, key: str, attr: str, default: Any, low: int = 0, high: int = 0, env: str = ""
    ) -> None:
        self.key = key
        self.attr = attr
        self.default = default
        self.low = low
        self.high = high
        self.env = env


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "connectTimeoutMs", "connect_timeout_ms", 2000, 1, 60_000, "PEDELEC_CONNECT_TIMEOUT_MS"
    ),
    Setting(
        "coreResponseTimeoutMs",
        "core_response_timeout_ms",
        120_000,
        1,
        3_600_000,
        "PEDELEC_CORE_RESPONSE_TIMEOUT_MS",
    ),
    Setting(
        "launchTimeoutMs", "launch_timeout_ms", 10_000, 1, 300_000, "PEDELEC_LAUNCH_TIMEOUT_MS"
    ),
    Setting("launchPollIntervalMs", "launch_poll_interval_ms", 200, 1, 10_000),
    Setting("maxInFlightRequests", "max_in_flight_requests", 64, 32, 4096),
    Setting("maxUntimedRequests", "max_untimed_requests", 8, 1, 256),
    Setting("maxInFlightBytes", "max_in_flight_bytes", 33_554_432, 1_048_576, 1_073_741_824),
    Setting("maxQueuedRequests", "max_queued_requests", 4096, 0, 65_536),
    Setting("maxQueuedBytes", "max_queued_bytes", 33_554_432, 0, 1_073_741_824),
    Setting("maxSubscriptions", "max_subscriptions", 256, 1, 4096),
    Setting("checkRuntimePid", "check_runtime_pid", True),
    Setting("logLevel", "log_level", "info", env="PEDELEC_NATIVE_HOST_LOG"),
    Setting("allowedExtensionIds", "allowed_extension_ids", ()),
)
"""Integers carry (low, high) bounds; the lower bound of maxInFlightRequests is the
spec's minimum cap (7.1)."""


class HostConfig:
    """Effective settings of one host process (immutable; `replace` makes a copy)."""

    __slots__ = (*(s.attr for s in SETTINGS), "problems")

    allowed_extension_ids: tuple[str, ...]
    connect_timeout_ms: int
    core_response_timeout_ms: int
    launch_timeout_ms: int
    launch_poll_interval_ms: int
    max_in_flight_requests: int
    max_untimed_requests: int
    max_in_flight_bytes: int
    max_queued_requests: int
    max_queued_bytes: int
    max_subscriptions: int
    check_runtime_pid: bool
    log_level: str
    problems: tuple[str, ...]
    """Why the file (or an override) was ignored, for the log and `doctor`."""

    def __init__(self, **values: Any) -> None:
        for setting in SETTINGS:
            object.__setattr__(self, setting.attr, values.pop(setting.attr, setting.default))
        object.__setattr__(self, "problems", tuple(values.pop("problems", ())))
        if values:
            raise TypeError(f"unknown settings: {', '.join(values)}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("HostConfig is immutable; use replace()")

    def replace(self, **changes: Any) -> HostConfig:
        values = {s.attr: getattr(self, s.attr) for s in SETTINGS}
        values["problems"] = self.problems
        values.update(changes)
        return HostConfig(**values)

    def __repr__(self) -> str:
        fields = ", ".join(f"{s.attr}={getattr(self, s.attr)!r}" for s in SETTINGS)
        return f"HostConfig({fields})"


def parse_int(text: str, low: int, high: int) -> int | None:
    """ASCII digits within bounds, else None (`isdigit` accepts `²` and `٣`)."""
    text = text.strip()
    if not text or len(text) > 12 or not set(text) <= _DIGITS:
        return None
    value = int(text)
    return value if low <= value <= high else None


def _file_value(setting: Setting, value: Any) -> tuple[Any, str | None]:
    """A validated file value, or the default and why it was refused."""
    default = setting.default
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        return (value, None) if ok else (default, "must be true or false")
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and setting.low <= value <= setting.high:
            return value, None
        return default, f"must be an integer from {setting.low} to {setting.high}"
    if setting.attr == "log_level":
        return (value, None) if value in LOG_LEVELS else (default, f"must be one of {LOG_LEVELS}")
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value), None
    return default, "must be a list of extension id strings"


def _read_file(path: str) -> tuple[HostConfig, str | None]:
    try:
        raw = files.read_trusted(path, MAX_CONFIG_BYTES)
    except files.FileRefusedError as exc:
        return HostConfig(), None if exc.reason == files.MISSING else exc.explanation
    try:
        data = codec.decode(raw)
    except codec.InvalidJsonError as exc:
        return HostConfig(), f"{path}: not valid JSON: {exc}"
    if not isinstance(data, dict):
        return HostConfig(), f"{path}: not a JSON object"
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.key in data:
            value, problem = _file_value(setting, data[setting.key])
            if problem is not None:
                return HostConfig(), f"{path}: {setting.key} {problem}"
            values[setting.attr] = value
    return HostConfig(**values), None


def load_config(env: Mapping[str, str] = os.environ) -> HostConfig:
    """Read `config.json` (an invalid file means defaults) and apply the environment."""
    config, problem = _read_file(os.path.join(paths.config_dir(env), paths.CONFIG_FILE))
    problems = [problem] if problem else []
    changes: dict[str, Any] = {}
    for setting in SETTINGS:
        if not setting.env or setting.env not in env:
            continue
        raw = env[setting.env]
        if setting.attr == "log_level":
            if raw.strip().lower() in LOG_LEVELS:
                changes["log_level"] = raw.strip().lower()
            elif raw:
                problems.append(f"{setting.env}={raw[:40]!r} is not one of {LOG_LEVELS}; ignored")
            continue
        value = parse_int(raw, setting.low, setting.high)
        if value is None:
            problems.append(
                f"{setting.env}={raw[:40]!r} is not an integer from {setting.low} to "
                f"{setting.high}; ignored"
            )
        else:
            changes[setting.attr] = value
    extra_ids = env.get("PEDELEC_ALLOWED_EXTENSION_IDS")
    if extra_ids:
        ids = tuple(i.strip() for i in extra_ids.split(",") if i.strip())
        changes["allowed_extension_ids"] = config.allowed_extension_ids + ids
    return config.replace(problems=tuple(problems), **changes)
