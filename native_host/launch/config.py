"""`app-launch.json`: how Pedelec Desktop says it can be started (spec 4.1, 4.3, 7.14 step 5).

The host and `doctor` both read it here. The file is read through the one trusted
reader (no symlink, regular file, the user's own, not writable by others, bounded),
validated as the Desktop validates it (its serde types: a missing or mistyped field does
not parse), and the executable it names must be safe to run (launch/trust.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from native_host import codec, errors, files, paths
from native_host.launch import spawn, trust

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

BACKGROUND_ARGS = ("--background",)
LAUNCH_CONFIG_VERSION = 1
MAX_LAUNCH_CONFIG_BYTES = 65_536


def _u32(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


def _string(value: object) -> bool:
    return isinstance(value, str)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


FIELDS: tuple[tuple[str, str, Callable[[object], bool]], ...] = (
    ("version", "an unsigned 32-bit integer", _u32),
    ("executablePath", "a string", _string),
    ("backgroundArgs", "a list of strings", _strings),
)
"""The fields of `app-launch.json`, each required, with the type the Desktop reads."""
REASON_UNREADABLE = "cannot read launch config"
REASON_NOT_JSON = "launch config is not valid JSON"
REASON_INVALID = "invalid launch config"


class LaunchConfig:
    """A validated `app-launch.json`."""

    __slots__ = ("background_args", "executable_path", "path")

    def __init__(self, path: str, executable_path: str, background_args: tuple[str, ...]):
        self.path = path
        self.executable_path = executable_path
        self.background_args = background_args

    @property
    def argv(self) -> list[str]:
        return [self.executable_path, *self.background_args]


def _unavailable(**details: Any) -> errors.HostError:
    return errors.HostError(
        errors.CORE_RUNTIME_UNAVAILABLE,
        errors.MSG_APP_NOT_RUNNING,
        errors.STAGE_READ_LAUNCH_CONFIG,
        **details,
    )


def launch_config_path(env: Mapping[str, str]) -> str:
    """Absolute path of `app-launch.json`; IPC_UNAVAILABLE when no home can be found."""
    try:
        home = paths.pedelec_home(env)
    except (RuntimeError, KeyError, OSError):
        raise errors.HostError(
            errors.IPC_UNAVAILABLE,
            errors.MSG_LAUNCH_HOME_UNRESOLVABLE,
            errors.STAGE_READ_LAUNCH_CONFIG,
        ) from None
    return os.path.abspath(os.path.join(home, paths.LAUNCH_CONFIG_FILE))


def read_launch_config(
    path: str | os.PathLike[str], env: Mapping[str, str] = os.environ
) -> LaunchConfig:
    """Read and validate `app-launch.json` as the Desktop does (spec 4.1), plus this
    host's checks (7.14 step 5): the file itself and the program it names must be the
    user's alone (launch/trust.py). Raises HostError with the §4.3 details."""
    where = os.fspath(path)
    try:
        raw = files.read_trusted(where, MAX_LAUNCH_CONFIG_BYTES)
    except files.FileRefusedError as exc:
        extra = {} if exc.reason in (files.MISSING, files.UNREADABLE) else {"violation": exc.reason}
        raise _unavailable(
            reason=REASON_UNREADABLE, detail=exc.explanation, launchConfigPath=where, **extra
        ) from None
    problem = _type_problem(raw)
    if problem is not None:
        raise _unavailable(reason=REASON_NOT_JSON, detail=problem, launchConfigPath=where)
    document: dict[str, Any] = codec.decode(raw)
    executable: str = document["executablePath"]
    background_args: list[str] = document["backgroundArgs"]

    def invalid(violation: str) -> errors.HostError:
        return _unavailable(
            reason=REASON_INVALID, detail=executable, launchConfigPath=where, violation=violation
        )

    if document["version"] != LAUNCH_CONFIG_VERSION:
        raise invalid("version")
    try:
        info = os.stat(executable) if os.path.isabs(executable) else None
    except (OSError, ValueError):
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        raise invalid("executablePath")
    if tuple(background_args) != BACKGROUND_ARGS:
        raise invalid("backgroundArgs")
    try:
        trust.open_trusted(executable, env).close()
        bundle = spawn.bundle_to_open(executable)
        if bundle is not None:  # what LaunchServices starts is what its Info.plist names
            from native_host.launch import macos

            macos.check_bundle(bundle, executable)
    except trust.UntrustedProgramError as exc:
        raise _unavailable(
            reason=REASON_INVALID,
            detail=executable,
            launchConfigPath=where,
            violation=exc.violation,
            error=str(exc),
        ) from None
    return LaunchConfig(where, executable, tuple(background_args))


def _type_problem(raw: bytes) -> str | None:
    """Why the bytes do not parse as the Desktop's `app-launch.json`, or None."""
    try:
        document = codec.decode(raw)
    except codec.InvalidJsonError as exc:
        return str(exc)
    if not isinstance(document, dict):
        return "the file is not a JSON object"
    for name, kind, valid in FIELDS:
        if name not in document:
            return f"{name}: missing"
        if not valid(document[name]):
            return f"{name}: must be {kind}"
    return None
