"""Payload shapes of the Core request types (spec 3.6, 9.2, 9.6).

Decoding is strict like serde: wrong JSON types fail, unknown fields are ignored. A failure
becomes `IPC_UNAVAILABLE` "Core IPC request payload had invalid shape" (spec 3.4).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from native_host.devcore.wire import CoreError

ProviderCode = Literal["codex", "antigravity", "opencode", "cursor", "claude", "ollama"]


class Payload(BaseModel):
    """Base: camelCase on the wire, strict types, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, strict=True, extra="ignore"
    )


class ThreadPayload(Payload):
    thread_id: str


class ToolDef(Payload):
    name: str
    description: str
    args_schema: Any = None
    timeout_ms: int | None = None


class Skills(Payload):
    guidance: str | None = None
    tools: list[ToolDef] | None = None


class CreateThreadPayload(Payload):
    provider: ProviderCode
    model: str | None = None
    effort: str | None = None
    effort_level: str | None = None
    skills: Skills | None = None
    workspace_id: str | None = None


class SendTextPayload(ThreadPayload):
    message: str
    operation_id: Any = None


class PreparePayload(ThreadPayload):
    operation_id: Any = None


class SubmitToolResultPayload(ThreadPayload):
    request_id: str
    result: Any


class AssetUploadPayload(ThreadPayload):
    filename: str
    size_bytes: int = Field(ge=0)
    mime_type: str = ""
    target_path: str | None = None


class AssetDownloadPayload(ThreadPayload):
    path: str


class ToolCallPayload(ThreadPayload):
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolSpecPayload(ThreadPayload):
    tool_name: str


class OpenWorkspacePayload(Payload):
    path: Any = None


class WorkspacePayload(Payload):
    workspace_id: str


class WorkspaceListPayload(WorkspacePayload):
    path: str | None = None


class WorkspaceRunPayload(WorkspacePayload):
    script: str
    timeout_ms: int | None = Field(default=None, gt=0)
    deno_modules: list[str] | None = None


class DenoModuleUploadPayload(ThreadPayload):
    module_name: str
    expected_size_bytes: int = Field(ge=0)


class WorkspaceDenoUploadPayload(WorkspacePayload):
    module_name: str
    expected_size_bytes: int = Field(ge=0)


class PrepareDenoModulesPayload(WorkspacePayload):
    module_names: list[str]


class WorkspaceFileUploadPayload(WorkspacePayload):
    filename: str
    size_bytes: int = Field(ge=0)
    mime_type: str = ""
    target_path: str | None = None


class WorkspaceFileDownloadPayload(WorkspacePayload):
    path: str


P = TypeVar("P", bound=Payload)


def decode(model: type[P], request_type: str, payload: Any) -> P:
    """Validate `payload` (None when absent) or raise the spec 3.4 payload error."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        raise CoreError(
            "IPC_UNAVAILABLE",
            "Core IPC request payload had invalid shape",
            {"type": request_type, "error": f"{where}: {first['msg']}"},
        ) from None
