"""Host configuration: `config.json` plus environment overrides (spec 7.16).

The runtime value is a NamedTuple (not even `dataclasses`, which imports `inspect`), so a
host answering one `ping` pays for neither; the file schema is a pydantic model imported
only when the file exists.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from native_host import paths

log = logging.getLogger(__name__)


class HostConfig(NamedTuple):
    """Effective settings of one host process."""

    allowed_extension_ids: tuple[str, ...] = ()
    connect_timeout_ms: int = 2000
    core_response_timeout_ms: int = 120_000
    launch_timeout_ms: int = 10_000
    launch_poll_interval_ms: int = 200
    check_runtime_pid: bool = True
    log_level: str = "info"
    problems: tuple[str, ...] = ()
    """Why the file (or an override) was ignored, for the log and `doctor`."""


def _read_file(path: Path) -> tuple[HostConfig, str | None]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HostConfig(), None
    except OSError as exc:
        return HostConfig(), f"{path}: cannot read: {exc}"
    from pydantic import ValidationError

    from native_host.models import ConfigFile

    try:
        parsed = ConfigFile.model_validate(json.loads(raw))
    except json.JSONDecodeError as exc:
        return HostConfig(), f"{path}: line {exc.lineno}: not valid JSON: {exc.msg}"
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return HostConfig(), f"{path}: {where}: {first['msg']}"
    return (
        HostConfig(
            allowed_extension_ids=tuple(parsed.allowed_extension_ids),
            connect_timeout_ms=parsed.connect_timeout_ms,
            core_response_timeout_ms=parsed.core_response_timeout_ms,
            launch_timeout_ms=parsed.launch_timeout_ms,
            launch_poll_interval_ms=parsed.launch_poll_interval_ms,
            check_runtime_pid=parsed.check_runtime_pid,
            log_level=parsed.log_level,
        ),
        None,
    )


_ENV_TIMEOUTS = {
    "PEDELEC_LAUNCH_TIMEOUT_MS": "launch_timeout_ms",
    "PEDELEC_CONNECT_TIMEOUT_MS": "connect_timeout_ms",
    "PEDELEC_CORE_RESPONSE_TIMEOUT_MS": "core_response_timeout_ms",
}
_LOG_LEVELS = ("info", "debug", "trace")


def _with_timeout(config: HostConfig, attr: str, value: int) -> HostConfig:
    if attr == "launch_timeout_ms":
        return config._replace(launch_timeout_ms=value)
    if attr == "connect_timeout_ms":
        return config._replace(connect_timeout_ms=value)
    return config._replace(core_response_timeout_ms=value)


def load_config(env: Mapping[str, str] = os.environ) -> HostConfig:
    """Read `config.json` (an invalid file means defaults) and apply the environment."""
    config, problem = _read_file(paths.config_dir(env) / paths.CONFIG_FILE)
    problems = [problem] if problem else []
    for var, attr in _ENV_TIMEOUTS.items():
        value = env.get(var)
        if value is None:
            continue
        if value.strip().isdigit() and int(value) > 0:
            config = _with_timeout(config, attr, int(value))
        else:
            problems.append(f"{var}={value!r} is not a positive integer; ignored")
    extra_ids = env.get("PEDELEC_ALLOWED_EXTENSION_IDS")
    if extra_ids:
        ids = tuple(i.strip() for i in extra_ids.split(",") if i.strip())
        config = config._replace(allowed_extension_ids=config.allowed_extension_ids + ids)
    level = env.get("PEDELEC_NATIVE_HOST_LOG")
    if level:
        if level.lower() in _LOG_LEVELS:
            config = config._replace(log_level=level.lower())
        else:
            problems.append(f"PEDELEC_NATIVE_HOST_LOG={level!r} is not one of {_LOG_LEVELS}")
    return config._replace(problems=tuple(problems))
