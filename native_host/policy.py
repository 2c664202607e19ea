"""The origin policy file `origins.json` (spec 7.11 c, d): mode, approvals, block list.

`PolicyStore` is shared by the relay (checks and host-local requests) and the CLI. A
missing file means mode `extension` with empty lists and never loads pydantic; a file
that cannot be read or validated makes every check fail closed. Writes are atomic and
serialised across threads and processes, so a host and the CLI never lose an update.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from native_host import files, logs, paths
from native_host.errors import (
    INVALID_ORIGIN,
    MSG_INVALID_ORIGIN,
    MSG_ORIGIN_NOT_APPROVED,
    MSG_POLICY_NOT_READ,
    MSG_POLICY_NOT_SAVED,
    ORIGIN_NOT_APPROVED,
    STAGE_UPDATE_ORIGIN_POLICY,
    STAGE_VALIDATE_ORIGIN,
    STORAGE_ERROR,
    HostError,
)
from native_host.origins import (
    BlockPattern,
    InvalidOriginError,
    invalid_origin_error,
    normalize_origin,
)

log = logs.get(__name__)

Mode = Literal["extension", "strict"]
MODES: tuple[Mode, ...] = ("extension", "strict")
POLICY_VERSION = 1

MAX_POLICY_BYTES = 1_048_576


@dataclass(frozen=True)
class Approval:
    """One `approved` entry as it is on disk (the origin may be hand-written, unnormalised)."""

    origin: str
    approved_at: int


@dataclass(frozen=True)
class Policy:
    """The file's content. Entries are kept as written so a rewrite never drops the
    user's text; the effective sets are derived in `_Effective`."""

    mode: Mode = "extension"
    approved: tuple[Approval, ...] = ()
    blocked: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The on-disk form: indented for people who edit it by hand."""
        document = {
            "version": POLICY_VERSION,
            "mode": self.mode,
            "approved": [{"origin": a.origin, "approvedAt": a.approved_at} for a in self.approved],
            "blocked": list(self.blocked),
        }
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class _Effective:
    """What checks use: normalised approvals and parsed block patterns, or why the file
    is unusable."""

    policy: Policy | None
    problem: str | None = None
    approved: dict[str, int] = field(default_factory=dict)
    """Normalised origin -> approvedAt, first entry wins."""
    patterns: tuple[BlockPattern, ...] = ()

    @classmethod
    def of(cls, policy: Policy, path: str) -> _Effective:
        approved: dict[str, int] = {}
        for entry in policy.approved:
            try:
                approved.setdefault(normalize_origin(entry.origin), entry.approved_at)
            except InvalidOriginError as exc:
                log.warning("%s: approved origin %r ignored: %s", path, entry.origin, exc.reason)
        patterns: list[BlockPattern] = []
        for text in policy.blocked:
            try:
                patterns.append(BlockPattern.parse(text))
            except InvalidOriginError as exc:
                log.warning("%s: blocked entry %r ignored: %s", path, text, exc.reason)
        return cls(policy, None, approved, tuple(patterns))

    def blocks(self, origin: str) -> bool:
        return any(pattern.matches(origin) for pattern in self.patterns)


class _PolicyInvalid(Exception):
    """The policy file exists but is not a valid policy."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


_Signature = tuple[int, int, int]
"""(inode, size, mtime_ns): a changed file shows a change in one of them."""


class PolicyStore:
    """The policy file at `path`, cached until its mtime, size or inode changes."""

    def __init__(self, path: str | os.PathLike[str], now_ms: Callable[[], int] | None = None):
        self.path = os.fspath(path)
        directory, name = os.path.split(self.path)
        self.lock_path = os.path.join(directory, f".{name}.lock")
        self._now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)
        self._cache_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._cached: tuple[_Signature | None, _Effective] | None = None

    @classmethod
    def for_env(cls, env: Mapping[str, str] = os.environ) -> PolicyStore:
        """The store of `origins.json` in the config dir (spec 7.16)."""
        return cls(os.path.join(paths.config_dir(env), paths.POLICY_FILE))

    # --- reading -------------------------------------------------------------------

    def _effective(self) -> _Effective:
        """The current policy, re-read only when the file changed."""
        signature = self._signature()
        with self._cache_lock:
            if self._cached is not None and self._cached[0] == signature:
                return self._cached[1]
            signature, effective = self._read()
            self._cached = (signature, effective)
            return effective

    def _signature(self) -> _Signature | None:
        try:
            st = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return (-1, -1, -1)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _read(self) -> tuple[_Signature | None, _Effective]:
        """Read and validate the file through the trusted reader (a planted file fails
        closed like an invalid one); the signature comes from the same open file so a
        concurrent replace is noticed on the next check."""
        try:
            raw, st = files.read_trusted_stat(self.path, MAX_POLICY_BYTES)
        except files.FileRefusedError as exc:
            if exc.reason == files.MISSING:
                return None, _Effective.of(Policy(), self.path)
            log.error("origin policy refused, failing closed: %s", exc.explanation)
            return self._signature(), _Effective(None, exc.explanation)
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        try:
            policy = _parse_policy(raw, self.path)
        except _PolicyInvalid as exc:
            log.error("origin policy invalid, failing closed: %s", exc.problem)
            return signature, _Effective(None, exc.problem)
        return signature, _Effective.of(policy, self.path)

    def problem(self) -> str | None:
        """Why the file is unusable (path and line included), or None if it is fine."""
        return self._effective().problem

    def check(self, origin: str) -> None:
        """Allow a normalised `callerOrigin`, or raise `ORIGIN_NOT_APPROVED`."""
        effective = self._effective()
        if effective.policy is None:
            raise _not_approved(origin, "policy_invalid", error=effective.problem)
        if effective.blocks(origin):
            raise _not_approved(origin, "blocked")
        if effective.policy.mode == "strict" and origin not in effective.approved:
            raise _not_approved(origin, "not_approved")

    # --- writing -------------------------------------------------------------------

    def approve(self, origin: object) -> dict[str, Any]:
        """Add an origin to `approved`; idempotent, keeping the first approval time."""
        normalised = normalize_origin(origin)

        def change(policy: Policy) -> Policy | None:
            if any(_same_origin(a.origin, normalised) for a in policy.approved):
                return None
            entry = Approval(normalised, self._now_ms())
            return replace(policy, approved=(*policy.approved, entry))

        self._update(change)
        return {"origin": normalised, "approved": True}

    def revoke(self, origin: object) -> dict[str, Any]:
        """Remove every `approved` entry that normalises to this origin."""
        normalised = normalize_origin(origin)
        removed = False

        def change(policy: Policy) -> Policy | None:
            nonlocal removed
            kept = tuple(a for a in policy.approved if not _same_origin(a.origin, normalised))
            removed = len(kept) < len(policy.approved)
            return replace(policy, approved=kept) if removed else None

        self._update(change)
        return {"origin": normalised, "revoked": removed}

    def block(self, entry: str) -> dict[str, Any]:
        """Add a block entry (stored normalised); InvalidOriginError if it is unusable."""
        pattern = BlockPattern.parse(entry)

        def change(policy: Policy) -> Policy | None:
            if pattern.text in policy.blocked:
                return None
            return replace(policy, blocked=(*policy.blocked, pattern.text))

        self._update(change)
        return {"pattern": pattern.text, "blocked": True}

    def unblock(self, entry: str) -> dict[str, Any]:
        """Remove block entries equal to `entry` as written or after normalisation, so
        invalid hand-written entries can be removed too."""
        try:
            text = BlockPattern.parse(entry).text
        except InvalidOriginError:
            text = entry
        removed = False

        def change(policy: Policy) -> Policy | None:
            nonlocal removed
            kept = tuple(b for b in policy.blocked if b != entry and _pattern_text(b) != text)
            removed = len(kept) < len(policy.blocked)
            return replace(policy, blocked=kept) if removed else None

        self._update(change)
        return {"pattern": text, "unblocked": removed}

    def set_mode(self, mode: str) -> dict[str, Any]:
        """Switch between `extension` and `strict`."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")

        def change(policy: Policy) -> Policy | None:
            return None if policy.mode == mode else replace(policy, mode=mode)

        self._update(change)
        return {"mode": mode}

    def _update(self, change: Callable[[Policy], Policy | None]) -> None:
        """Read-modify-write under the thread and file locks, always from disk (a cached
        signature could collide with another process's write). A corrupt file is never
        overwritten. Checks keep using the cache meanwhile."""
        with self._write_lock, self._file_lock():
            _, effective = self._read()
            if effective.policy is None:
                raise _storage_error(
                    f"{effective.problem}; fix the file by hand, or delete it to start over"
                )
            updated = change(effective.policy)
            if updated is not None:
                self._write(updated)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """An advisory lock on a sibling file: the policy file itself is replaced on write."""
        lock = files.FileLock(self.lock_path)
        try:
            files.ensure_private_dir(os.path.dirname(self.path))
            lock.acquire()
        except (OSError, files.FileRefusedError) as exc:
            lock.release()
            raise _storage_error(str(exc)) from exc
        try:
            yield
        finally:
            lock.release()

    def _write(self, policy: Policy) -> None:
        """One atomic replace (spec 7.11 c), private whatever the umask; never a file
        larger than the host reads (it would refuse it, and fail closed for every page)."""
        data = policy.to_json().encode("utf-8")
        if len(data) > MAX_POLICY_BYTES:
            raise _storage_error(
                f"the policy would be {len(data)} bytes, more than the {MAX_POLICY_BYTES} "
                "the host reads; revoke or unblock origins first"
            )
        try:
            files.atomic_write(self.path, data)
        except OSError as exc:
            raise _storage_error(str(exc)) from exc

    # --- host-local answer ---------------------------------------------------------

    def list(self) -> dict[str, Any]:
        """`list_origin_approvals`: the mode, normalised approvals and block entries."""
        effective = self._effective()
        if effective.policy is None:
            raise HostError(
                STORAGE_ERROR,
                MSG_POLICY_NOT_READ,
                STAGE_UPDATE_ORIGIN_POLICY,
                error=effective.problem,
            )
        return {
            "mode": effective.policy.mode,
            "approved": [
                {"origin": origin, "approvedAt": at} for origin, at in effective.approved.items()
            ],
            "blocked": list(effective.policy.blocked),
        }


def _same_origin(written: str, normalised: str) -> bool:
    try:
        return normalize_origin(written) == normalised
    except InvalidOriginError:
        return False


def _pattern_text(entry: str) -> str | None:
    try:
        return BlockPattern.parse(entry).text
    except InvalidOriginError:
        return None


def _not_approved(origin: str, reason: str, **details: Any) -> HostError:
    return HostError(
        ORIGIN_NOT_APPROVED,
        MSG_ORIGIN_NOT_APPROVED,
        STAGE_VALIDATE_ORIGIN,
        callerOrigin=origin,
        reason=reason,
        **details,
    )


def _storage_error(error: str) -> HostError:
    return HostError(STORAGE_ERROR, MSG_POLICY_NOT_SAVED, STAGE_UPDATE_ORIGIN_POLICY, error=error)


# --- parsing -------------------------------------------------------------------------


def _parse_policy(raw: bytes, path: str) -> Policy:
    """Decode and validate the file; _PolicyInvalid names the path and the line."""
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise _PolicyInvalid(f"{path}: not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise _PolicyInvalid(
            f"{path}: line {exc.lineno} column {exc.colno}: not valid JSON: {exc.msg}"
        ) from None
    return _validate(data, path)


def _validate(data: object, path: str) -> Policy:
    """The schema of `origins.json` (spec 7.11 c), every key optional; the first problem
    found is named by where it is (`approved.0.approvedAt: missing`)."""

    def invalid(where: str, problem: str) -> _PolicyInvalid:
        return _PolicyInvalid(f"{path}: {where}: {problem}")

    if not isinstance(data, dict):
        raise invalid("top level", "must be a JSON object")
    if data.get("version", POLICY_VERSION) != POLICY_VERSION:
        raise invalid("version", f"must be {POLICY_VERSION}")
    mode = data.get("mode", "extension")
    if mode not in MODES:
        raise invalid("mode", "must be 'extension' or 'strict'")
    approved = data.get("approved", [])
    if not isinstance(approved, list):
        raise invalid("approved", "must be a list")
    entries = []
    for index, entry in enumerate(approved):
        where = f"approved.{index}"
        if not isinstance(entry, dict):
            raise invalid(where, "must be an object")
        for key in ("origin", "approvedAt"):
            if key not in entry:
                raise invalid(f"{where}.{key}", "missing")
        if not isinstance(entry["origin"], str):
            raise invalid(f"{where}.origin", "must be a string")
        at = entry["approvedAt"]
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise invalid(f"{where}.approvedAt", "must be a non-negative integer")
        entries.append(Approval(entry["origin"], at))
    blocked = data.get("blocked", [])
    if not isinstance(blocked, list):
        raise invalid("blocked", "must be a list")
    for index, item in enumerate(blocked):
        if not isinstance(item, str):
            raise invalid(f"blocked.{index}", "must be a string")
    return Policy(mode=mode, approved=tuple(entries), blocked=tuple(blocked))


# --- relay helpers (spec 1.4 step 4, 7.11 d) -----------------------------------------


def validate_caller_origin(value: object, store: PolicyStore) -> str:
    """Normalise a `callerOrigin` and apply the policy; the normalised origin, or the
    `INVALID_ORIGIN` / `ORIGIN_NOT_APPROVED` error to reply with."""
    try:
        origin = normalize_origin(value)
    except InvalidOriginError as exc:
        raise invalid_origin_error(value, exc.reason) from None
    store.check(origin)
    return origin


def host_local_request_error(caller_origin: object) -> HostError:
    """The reply to a host-local request that carries a `callerOrigin` (it came from a page)."""
    details = {"callerOrigin": caller_origin} if isinstance(caller_origin, str) else {}
    return HostError(
        ORIGIN_NOT_APPROVED,
        MSG_ORIGIN_NOT_APPROVED,
        STAGE_VALIDATE_ORIGIN,
        reason="host_local_request",
        **details,
    )


def handle_host_local(message: Mapping[str, Any], store: PolicyStore) -> dict[str, Any]:
    """Answer `approve_origin`, `revoke_origin` or `list_origin_approvals` (the relay has
    already refused them when they carry a `callerOrigin`)."""
    kind = message.get("type")
    if kind == "list_origin_approvals":
        return store.list()
    if kind not in ("approve_origin", "revoke_origin"):
        raise ValueError(f"not a host-local request type: {kind!r}")
    if "origin" not in message:
        raise HostError(
            INVALID_ORIGIN, MSG_INVALID_ORIGIN, STAGE_VALIDATE_ORIGIN, reason="origin is required"
        )
    origin = message["origin"]
    try:
        return store.approve(origin) if kind == "approve_origin" else store.revoke(origin)
    except InvalidOriginError as exc:
        raise HostError(
            INVALID_ORIGIN, MSG_INVALID_ORIGIN, STAGE_VALIDATE_ORIGIN, reason=exc.reason
        ) from None
