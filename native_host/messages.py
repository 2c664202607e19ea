"""The native request types and their native -> Core transformations, as data (spec 1.6, 9.2).

Pure functions only: no I/O, no sockets.
"""

from __future__ import annotations

from native_host import errors
from native_host.codec import MAX_DEPTH

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PASS = None
"""A rule of None passes the payload unchanged, unknown fields included."""

RELAY_RULES: dict[str, tuple[str, ...] | None] = {
    "create_thread": ("provider", "model", "effort", "effortLevel", "skills", "workspaceId"),
    "subscribe_thread": PASS,
    "send_text": PASS,
    "prepare_thread": PASS,
    "end_thread": PASS,
    "submit_tool_result": PASS,
    "create_asset_upload": PASS,
    "create_asset_download": PASS,
    "list_assets": PASS,
    "list_providers": PASS,
    "get_settings": PASS,
    "ping": PASS,
    "resume_thread": PASS,
    "thread_snapshot": PASS,
    "open_workspace": ("path",),
    "workspace_list_files": ("workspaceId", "path"),
    "workspace_list_folders": ("workspaceId", "path"),
    "workspace_run": ("workspaceId", "script", "timeoutMs", "denoModules"),
    "create_deno_module_upload": ("threadId", "moduleName", "expectedSizeBytes"),
    "abort_session_setup": ("threadId",),
    "prepare_workspace_deno_modules": ("workspaceId", "moduleNames"),
    "create_workspace_deno_module_upload": ("workspaceId", "moduleName", "expectedSizeBytes"),
    "create_workspace_file_upload": (
        "workspaceId",
        "filename",
        "sizeBytes",
        "mimeType",
        "targetPath",
    ),
    "create_workspace_file_download": ("workspaceId", "path"),
}
"""The 24 relay types: None = pass, a tuple = the allow-listed payload fields."""

HOST_LOCAL_TYPES = frozenset({"approve_origin", "revoke_origin", "list_origin_approvals"})
METADATA_KEYS = ("requestId", "type", "callerOrigin", "callerSdkVersion")

OVERSIZE_RESPONSE_ERRORS: dict[str, tuple[str, str]] = {
    "workspace_list_files": (errors.WORKSPACE_LIST_TOO_LARGE, errors.MSG_WORKSPACE_LIST_TOO_LARGE),
    "workspace_list_folders": (
        errors.WORKSPACE_LIST_TOO_LARGE,
        errors.MSG_WORKSPACE_LIST_TOO_LARGE,
    ),
    "workspace_run": (errors.WORKSPACE_RUN_OUTPUT_TOO_LARGE, errors.MSG_WORKSPACE_RUN_TOO_LARGE),
}
"""Per-type code of an oversize response (spec 9.4); others get MESSAGE_TOO_LARGE."""

WORKSPACE_RUN_MARGIN_MS = 30_000
WORKSPACE_RUN_DEFAULT_MS = 60_000
MAX_PAGE_TIMEOUT_MS = 1_800_000
"""The longest a page-supplied timeout (`workspace_run.timeoutMs`) may hold a request:
30 minutes. The value still reaches the Core unchanged; only the host's wait is capped."""


class NativeRequest:
    """A validated native request: what the relay needs to route it."""

    __slots__ = ("has_origin", "message", "request_id", "type")

    def __init__(self, request_id: str, kind: str, message: dict[str, Any], has_origin: bool):
        self.request_id = request_id
        self.type = kind
        self.message = message
        self.has_origin = has_origin

    @property
    def sdk_version(self) -> str | None:
        value = self.message.get("callerSdkVersion")
        return value if isinstance(value, str) else None


def validate_envelope(message: Any) -> NativeRequest:
    """Spec 1.4 steps 2-3 and 5 (the origin step is the relay's): raise HostError or return."""
    if not isinstance(message, dict):
        raise errors.HostError(
            errors.IPC_UNAVAILABLE, errors.MSG_NOT_OBJECT, errors.STAGE_PARSE_MESSAGE
        )
    request_id = message.get("requestId")
    if not isinstance(request_id, str) or not request_id.strip():
        raise errors.HostError(
            errors.IPC_UNAVAILABLE, errors.MSG_REQUEST_ID_REQUIRED, errors.STAGE_VALIDATE_REQUEST
        )
    kind = message.get("type")
    if not isinstance(kind, str) or not kind.strip():
        raise errors.HostError(
            errors.IPC_UNAVAILABLE, errors.MSG_TYPE_REQUIRED, errors.STAGE_VALIDATE_REQUEST
        )
    if kind not in RELAY_RULES and kind not in HOST_LOCAL_TYPES:
        raise errors.HostError(
            errors.IPC_UNAVAILABLE,
            errors.MSG_UNKNOWN_TYPE,
            errors.STAGE_VALIDATE_REQUEST,
            type=kind,
        )
    return NativeRequest(request_id, kind, message, "callerOrigin" in message)


def request_id_of(document: Any) -> str:
    """The requestId to answer a refused message under: its own when it is a usable
    string (non-blank, valid Unicode), else ""."""
    if not isinstance(document, dict):
        return ""
    value = document.get("requestId")
    if not isinstance(value, str) or not value.strip():
        return ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return ""
    return value


def check_subscribe_fields(message: dict[str, Any]) -> None:
    """Spec 1.4 step 5: subscribe_thread needs a non-blank string threadId."""
    thread_id = message.get("threadId")
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise errors.HostError(
            errors.IPC_UNAVAILABLE,
            errors.MSG_SUBSCRIBE_NEEDS_THREAD,
            errors.STAGE_VALIDATE_REQUEST,
        )


def core_payload(kind: str, message: dict[str, Any]) -> dict[str, Any]:
    """The Core payload of a relay request (spec 9.2 step 6)."""
    if kind == "ping":
        return {}
    rest = {k: v for k, v in message.items() if k not in METADATA_KEYS}
    allowed = RELAY_RULES[kind]
    if allowed is not None:
        rest = {k: rest[k] for k in allowed if k in rest}
    if kind == "submit_tool_result" and "toolRequestId" in rest:
        rest = {("requestId" if k == "toolRequestId" else k): v for k, v in rest.items()}
    return rest


def core_envelope(
    request: NativeRequest,
    origin: str | None,
    kind: str | None = None,
) -> dict[str, Any]:
    """The Core envelope `{requestId, type, callerOrigin?, callerSdkVersion?, payload}`.

    `kind` overrides the type (a duplicate subscribe becomes `thread_snapshot`).
    """
    envelope: dict[str, Any] = {"requestId": request.request_id, "type": kind or request.type}
    if origin is not None:
        envelope["callerOrigin"] = origin
    if request.sdk_version is not None:
        envelope["callerSdkVersion"] = request.sdk_version
    envelope["payload"] = core_payload(request.type, request.message)
    return envelope


def response_timeout_ms(kind: str, payload: dict[str, Any], default_ms: int) -> int | None:
    """The response timeout of a request type (spec 9.5); None = wait without limit."""
    if kind == "open_workspace" and not isinstance(payload.get("path"), str):
        return None
    if kind == "workspace_run":
        limit = payload.get("timeoutMs")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            return min(limit, MAX_PAGE_TIMEOUT_MS) + WORKSPACE_RUN_MARGIN_MS
        return WORKSPACE_RUN_DEFAULT_MS + WORKSPACE_RUN_MARGIN_MS
    return default_ms


def ok_response(request_id: str, result: Any) -> dict[str, Any]:
    return {"type": "response", "requestId": request_id, "ok": True, "result": result}


def error_response(request_id: str, error: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response", "requestId": request_id, "ok": False, "error": error}


def oversize_response_error(kind: str, size: int) -> errors.HostError:
    """The error that replaces a response frame over 1 MiB (spec 7.7, 9.4)."""
    code, message = OVERSIZE_RESPONSE_ERRORS.get(
        kind, (errors.MESSAGE_TOO_LARGE, errors.MSG_RESPONSE_TOO_LARGE)
    )
    return errors.HostError(code, message, errors.STAGE_RELAY_RESPONSE, sizeBytes=size)


def too_deep_response_error() -> errors.HostError:
    """The error that replaces a response frame nested deeper than codec.MAX_DEPTH."""
    return errors.HostError(
        errors.MESSAGE_TOO_LARGE,
        errors.MSG_RESPONSE_TOO_DEEP,
        errors.STAGE_RELAY_RESPONSE,
        limitDepth=MAX_DEPTH,
    )
