"""Every error code, message and `details.stage` this host produces (spec 7.4, 9.4).

Core's own errors are relayed untouched and never pass through here.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs a relay start milliseconds; annotations only
    from typing import Any

# --- codes -----------------------------------------------------------------
IPC_UNAVAILABLE = "IPC_UNAVAILABLE"
CORE_RUNTIME_UNAVAILABLE = "CORE_RUNTIME_UNAVAILABLE"
MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
NATIVE_CONNECTION_CLOSED = "NATIVE_CONNECTION_CLOSED"
INVALID_ORIGIN = "INVALID_ORIGIN"
ORIGIN_NOT_APPROVED = "ORIGIN_NOT_APPROVED"
STORAGE_ERROR = "STORAGE_ERROR"
WORKSPACE_LIST_TOO_LARGE = "WORKSPACE_LIST_TOO_LARGE"
WORKSPACE_RUN_OUTPUT_TOO_LARGE = "WORKSPACE_RUN_OUTPUT_TOO_LARGE"
HOST_BUSY = "HOST_BUSY"
"""This host's own: a cap on what one page may hold in flight was hit (docs/security.md)."""
HOST_RESOURCES_EXHAUSTED = "HOST_RESOURCES_EXHAUSTED"
"""This host's own: the process ran out of file descriptors (EMFILE/ENFILE)."""

# --- stages ----------------------------------------------------------------
STAGE_READ_FRAME = "read_frame"
STAGE_PARSE_MESSAGE = "parse_message"
STAGE_VALIDATE_REQUEST = "validate_request"
STAGE_VALIDATE_ORIGIN = "validate_origin"
STAGE_DISCOVER_CORE = "discover_core"
STAGE_CONNECT_CORE = "connect_core"
STAGE_LAUNCH_DESKTOP = "launch_desktop"
STAGE_READ_LAUNCH_CONFIG = "read_launch_config"
STAGE_SPAWN_DESKTOP_APP = "spawn_desktop_app"
STAGE_WAIT_FOR_CORE_RUNTIME = "wait_for_core_runtime"
STAGE_SEND_REQUEST = "send_request"
STAGE_AWAIT_CORE_RESPONSE = "await_core_response"
STAGE_RELAY_RESPONSE = "relay_response"
STAGE_SUBSCRIBE = "subscribe"
STAGE_RELAY_EVENT = "relay_event"
STAGE_UPDATE_ORIGIN_POLICY = "update_origin_policy"
STAGE_ADMIT_REQUEST = "admit_request"
"""This host's own: a cap refused the request before anything else happened."""
STAGE_VERIFY_CORE = "verify_core"
"""This host's own: the listener on the Core's port is not the user's Core."""

ALL_STAGES = frozenset(
    {
        STAGE_READ_FRAME,
        STAGE_PARSE_MESSAGE,
        STAGE_VALIDATE_REQUEST,
        STAGE_VALIDATE_ORIGIN,
        STAGE_DISCOVER_CORE,
        STAGE_CONNECT_CORE,
        STAGE_LAUNCH_DESKTOP,
        STAGE_READ_LAUNCH_CONFIG,
        STAGE_SPAWN_DESKTOP_APP,
        STAGE_WAIT_FOR_CORE_RUNTIME,
        STAGE_SEND_REQUEST,
        STAGE_AWAIT_CORE_RESPONSE,
        STAGE_RELAY_RESPONSE,
        STAGE_SUBSCRIBE,
        STAGE_RELAY_EVENT,
        STAGE_UPDATE_ORIGIN_POLICY,
        STAGE_ADMIT_REQUEST,
        STAGE_VERIFY_CORE,
    }
)

# --- messages (kept verbatim from the existing host where it had one) -------
MSG_FRAME_TOO_LARGE = "native message exceeds size limit"
MSG_NOT_JSON = "native message was not valid JSON"
MSG_NOT_OBJECT = "native message must be an object"
MSG_REQUEST_ID_REQUIRED = "requestId is required"
MSG_TYPE_REQUIRED = "type is required"
MSG_UNKNOWN_TYPE = "unknown native request type"
MSG_SUBSCRIBE_NEEDS_THREAD = "subscribe_thread requires threadId"
MSG_INVALID_ORIGIN = "invalid caller origin"
MSG_ORIGIN_NOT_APPROVED = "caller origin is not approved"
MSG_EXTENSION_NOT_ALLOWED = "calling extension is not allowed"
MSG_HOME_UNRESOLVABLE = "cannot resolve user home directory for runtime.json"
MSG_LAUNCH_HOME_UNRESOLVABLE = "cannot resolve user home directory"
MSG_APP_NOT_RUNNING = "pedelec-app is not running"
MSG_REQUEST_TOO_LARGE = "Core IPC request exceeds size limit"
MSG_CORE_LINE_TOO_LARGE = "Core IPC message exceeds size limit"
MSG_CORE_LINE_TOO_DEEP = "Core IPC message exceeds nesting limit"
"""A Core line nested deeper than the browser reads (codec.MAX_DEPTH): like an oversize one."""
MSG_CORE_CLOSED_UNUSED = "Core closed the connection before the request was sent"
"""Twice in a row: a Core shutting down or overloaded, answered without a launch."""
MSG_RESPONSE_TIMED_OUT = "Core IPC response timed out"
MSG_RESPONSE_NOT_JSON = "Core IPC response was not valid JSON"
MSG_RESPONSE_BAD_SHAPE = "Core IPC response had invalid shape"
MSG_SUBSCRIBE_NOT_JSON = "Core IPC subscribe response was not valid JSON"
MSG_NO_SNAPSHOT = "thread_snapshot response did not include a snapshot"
MSG_RESPONSE_TOO_LARGE = "response exceeds native message size limit"
MSG_RESPONSE_TOO_DEEP = "response exceeds native message nesting limit"
MSG_WORKSPACE_LIST_TOO_LARGE = "workspace listing is too large; list a narrower path"
MSG_WORKSPACE_RUN_TOO_LARGE = "workspace run output is too large"
MSG_EVENT_TOO_LARGE = "thread event exceeds native message size limit"
MSG_EVENT_NOT_JSON = "Core IPC event was not valid JSON"
MSG_SUBSCRIPTION_CLOSED = "Core IPC subscription closed"
MSG_CONNECTION_CLOSED = "Core IPC connection closed"
MSG_INTERNAL = "native host internal error"
MSG_POLICY_NOT_SAVED = "origin policy could not be saved"
MSG_POLICY_NOT_READ = "origin policy could not be read"
MSG_HOST_BUSY = "native host has too much in flight; retry when earlier requests finish"
MSG_RESOURCES_EXHAUSTED = "native host is out of file descriptors"

# --- which bound refused a request (`details.reason` of HOST_BUSY) -----------
BUSY_SUBSCRIPTIONS = "subscriptions"
BUSY_QUEUED_REQUESTS = "queued_requests"
BUSY_QUEUED_BYTES = "queued_bytes"
BUSY_ORIGIN_QUEUED_REQUESTS = "origin_queued_requests"
BUSY_ORIGIN_QUEUED_BYTES = "origin_queued_bytes"
NOTE_SUBSCRIPTIONS_NOT_QUEUED = (
    "a live subscription holds its place until it ends, so subscribes over the cap are "
    "refused, never queued"
)


class HostError(Exception):
    """An error this host reports to the extension: code, message and details with a stage."""

    def __init__(self, code: str, message: str, stage: str, **details: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = {"stage": stage, **details}

    @property
    def stage(self) -> str:
        return str(self.details["stage"])

    def to_error(self) -> dict[str, Any]:
        """The wire error object `{code, message, details}`."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def restaged(self, stage: str) -> HostError:
        """The same error reported at another stage (e.g. `subscribe` instead of
        `await_core_response` for a subscription's setup)."""
        details = {k: v for k, v in self.details.items() if k != "stage"}
        return HostError(self.code, self.message, stage, **details)


def resources_exhausted(stage: str, error: str) -> HostError:
    """EMFILE/ENFILE: a resource error, never "the Core is down" (no launch follows)."""
    return HostError(HOST_RESOURCES_EXHAUSTED, MSG_RESOURCES_EXHAUSTED, stage, error=error)


def host_busy(reason: str, limit: int, **details: Any) -> HostError:
    """The queue (or the subscription cap) is full: answered at once (docs/security.md)."""
    return HostError(
        HOST_BUSY, MSG_HOST_BUSY, STAGE_ADMIT_REQUEST, reason=reason, limit=limit, **details
    )


def response_timed_out(stage: str, timeout_ms: int | None, **details: Any) -> HostError:
    """The request's response timeout (spec 7.3), counted from its admission, ran out."""
    return HostError(
        IPC_UNAVAILABLE, MSG_RESPONSE_TIMED_OUT, stage, timeoutMs=timeout_ms, **details
    )
