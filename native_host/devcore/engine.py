"""The dev Core's request handlers (spec 3.4, 3.6, 3.7, 9.6, 9.8), free of sockets.

`Engine.handle` answers one validated request; `subscribe_thread` is completed by the server,
which owns the connection that becomes the stream.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from native_host.devcore import payloads as p
from native_host.devcore.assets import (
    MAX_ASSET_BYTES,
    TicketBook,
    check_filename,
    check_rooted_path,
    list_assets,
)
from native_host.devcore.envelope import Request
from native_host.devcore.origins import normalise_origin
from native_host.devcore.provider import Turn, prepare
from native_host.devcore.settings import DevCoreSettings
from native_host.devcore.streams import Channel
from native_host.devcore.threads import BUSY_STATUSES, DevThread, validate_tools
from native_host.devcore.wire import CoreError
from native_host.devcore.workspaces import (
    WorkspaceRegistry,
    base36_id,
    list_paths,
    resolve_inside,
    run_script,
)

LEGACY_TYPES = frozenset(
    {
        "create_thread",
        "subscribe_thread",
        "send_text",
        "prepare_thread",
        "end_thread",
        "submit_tool_result",
        "create_asset_upload",
        "create_asset_download",
        "list_assets",
        "list_providers",
        "get_settings",
        "ping",
        "tool_call",
        "tool_spec",
    }
)
CURRENT_TYPES = LEGACY_TYPES | {
    "resume_thread",
    "thread_snapshot",
    "open_workspace",
    "workspace_list_files",
    "workspace_list_folders",
    "workspace_run",
    "create_deno_module_upload",
    "abort_session_setup",
    "prepare_workspace_deno_modules",
    "create_workspace_deno_module_upload",
    "create_workspace_file_upload",
    "create_workspace_file_download",
}
PROVIDERS: list[tuple[str, str, tuple[str, ...]]] = [
    ("codex", "Codex", ("codex",)),
    ("antigravity", "Antigravity", ("antigravity",)),
    ("opencode", "OpenCode", ("opencode",)),
    ("cursor", "Cursor", ("cursor-agent", "cursor")),
    ("claude", "Claude Code", ("claude",)),
    ("ollama", "Ollama", ("ollama",)),
]


def unknown_type(request_type: str) -> CoreError:
    return CoreError("IPC_UNAVAILABLE", "unknown Core IPC request type", {"type": request_type})


class Engine:
    """All Core state: threads, channels, Workspaces, tickets."""

    def __init__(self, settings: DevCoreSettings, stop: threading.Event) -> None:
        self.settings = settings
        self.current = settings.generation == "current"
        self.stop = stop
        self.data_dir = settings.home / "dev-core"
        self.lock = threading.Lock()
        self.threads: dict[str, DevThread] = {}
        self.channels: dict[str, Channel] = {}
        self.workspaces = WorkspaceRegistry(self.data_dir / "workspaces")
        self.tickets = TicketBook()
        self._thread_counter = itertools.count(1)
        self._op_counter = itertools.count(1)
        self._handlers: dict[str, Callable[[Request], Any]] = {
            "create_thread": self._create_thread,
            "send_text": self._send_text,
            "prepare_thread": self._prepare_thread,
            "end_thread": self._end_thread,
            "submit_tool_result": self._submit_tool_result,
            "create_asset_upload": self._create_asset_upload,
            "create_asset_download": self._create_asset_download,
            "list_assets": self._list_assets,
            "list_providers": self._list_providers,
            "get_settings": self._get_settings,
            "ping": self._ping,
            "tool_call": self._tool_call,
            "tool_spec": self._tool_spec,
            "resume_thread": self._resume_thread,
            "thread_snapshot": self._thread_snapshot,
            "open_workspace": self._open_workspace,
            "workspace_list_files": self._workspace_list_files,
            "workspace_list_folders": self._workspace_list_folders,
            "workspace_run": self._workspace_run,
            "create_deno_module_upload": self._create_deno_module_upload,
            "abort_session_setup": self._abort_session_setup,
            "prepare_workspace_deno_modules": self._prepare_workspace_deno_modules,
            "create_workspace_deno_module_upload": self._create_workspace_deno_module_upload,
            "create_workspace_file_upload": self._create_workspace_file_upload,
            "create_workspace_file_download": self._create_workspace_file_download,
        }

    # --- shared helpers -----------------------------------------------------------------

    def known(self, request_type: str) -> bool:
        return request_type in (CURRENT_TYPES if self.current else LEGACY_TYPES)

    def channel(self, thread_id: str) -> Channel:
        """The channel of a thread id, created on demand (also for ids no thread has)."""
        with self.lock:
            channel = self.channels.get(thread_id)
            if channel is None:
                channel = self.channels[thread_id] = Channel(thread_id)
            return channel

    def find_thread(self, thread_id: str) -> DevThread | None:
        with self.lock:
            return self.threads.get(thread_id)

    def thread_for(self, request: Request, thread_id: str) -> DevThread:
        """Spec 3.4 order after decoding: THREAD_NOT_FOUND, then origin authorisation (3.7)."""
        thread = self.find_thread(thread_id)
        if thread is None:
            raise CoreError("THREAD_NOT_FOUND", "thread was not found", {"threadId": thread_id})
        if thread.owner is not None:
            origin = normalise_origin(request.caller_origin) if request.caller_origin else None
            if origin != thread.owner:
                raise CoreError(
                    "THREAD_ACCESS_DENIED",
                    "thread is not accessible to this caller",
                    {"threadId": thread_id},
                )
        return thread

    def handle(self, request: Request) -> Any:
        """The result of one request, or raise CoreError."""
        if not self.known(request.type):
            raise unknown_type(request.type)
        if request.type == "thread_snapshot" and self.settings.faults.thread_snapshot_unknown:
            raise unknown_type(request.type)
        return self._handlers[request.type](request)

    def _operation_id(self, value: Any) -> str | None:
        if not self.current:
            return None
        if isinstance(value, str) and value:
            return value
        return f"op_{next(self._op_counter)}"

    @staticmethod
    def _check_open(thread: DevThread) -> None:
        if thread.status in ("ended", "stopping"):
            raise CoreError("THREAD_ENDED", "thread has ended", thread.details())

    # --- threads --------------------------------------------------------------------------

    def _create_thread(self, request: Request) -> Any:
        raw = request.payload
        if not self.current and isinstance(raw, dict):
            raw = {
                k: v for k, v in raw.items() if k not in ("effort", "effortLevel", "workspaceId")
            }
        payload = p.decode(p.CreateThreadPayload, request.type, raw)
        owner = None
        if request.caller_origin is not None:
            owner = normalise_origin(request.caller_origin)
            if owner is None:
                raise CoreError("THREAD_ACCESS_DENIED", "invalid caller origin")
        tools = validate_tools(payload.skills.tools or []) if payload.skills else []
        workspace = None
        if self.current:
            if payload.workspace_id is not None:
                workspace = self.workspaces.get(payload.workspace_id, owner or "")
            else:
                workspace = self.workspaces.create_managed(owner)
        with self.lock:
            thread_id = base36_id("t", next(self._thread_counter))
        assets_dir = self.data_dir / "threads" / thread_id / "assets"
        assets_dir.mkdir(parents=True, exist_ok=True)
        thread = DevThread(
            thread_id,
            provider=payload.provider,
            model=payload.model,
            owner=owner,
            tools=tools,
            workspace=workspace,
            assets_dir=assets_dir,
            channel=self.channel(thread_id),
            current=self.current,
        )
        with thread.lock:
            with self.lock:
                self.threads[thread_id] = thread
            thread.emit("created")
            thread.emit("status_changed", status="idle")
        if workspace is None:
            return {"threadId": thread_id}
        return {
            "threadId": thread_id,
            "workspaceId": workspace.workspace_id,
            "workspacePath": None if workspace.managed else str(workspace.path),
            "explicitModelConfigApplied": any(
                v is not None for v in (payload.model, payload.effort, payload.effort_level)
            ),
        }

    def subscribe(self, request: Request) -> tuple[dict[str, Any], DevThread]:
        """Validate a subscribe; the server registers the stream (no replay, spec 3.8)."""
        payload = p.decode(p.ThreadPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        return {"subscribed": True}, thread

    def subscribe_result(self, thread: DevThread) -> dict[str, Any]:
        """The subscribe result; call with the thread's lock held so `latestSeq` is exact."""
        if not self.current:
            return {"subscribed": True}
        workspace = thread.workspace.to_json() if thread.workspace else None
        return {"subscribed": True, "snapshot": thread.snapshot(), "workspace": workspace}

    def _send_text(self, request: Request) -> Any:
        payload = p.decode(p.SendTextPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        with thread.lock:
            self._check_startable(thread, "thread is already running")
            if thread.status == "error":
                raise CoreError(
                    "PROVIDER_COMMAND_FAILED", "thread is in error state", thread.details()
                )
            op = self._operation_id(payload.operation_id)
            thread.begin_operation("user", op)
            thread.set_status("running", op)
            Turn(thread, payload.message, op, self.stop).start()
        result: dict[str, Any] = {"threadId": thread.thread_id}
        if op is not None:
            result["operationId"] = op
        return result

    def _check_startable(self, thread: DevThread, busy_message: str) -> None:
        if thread.status == "ended":
            raise CoreError("THREAD_ENDED", "thread has ended", thread.details())
        if thread.status == "stopping":
            raise CoreError("THREAD_BUSY", "thread is stopping", thread.details())
        if thread.status in BUSY_STATUSES:
            raise CoreError("THREAD_BUSY", busy_message, thread.details())
        if thread.provider == "ollama" and not thread.model:
            raise CoreError("MODEL_REQUIRED", "ollama requires a model", thread.details())

    def _prepare_thread(self, request: Request) -> Any:
        payload = p.decode(p.PreparePayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        with thread.lock:
            self._check_startable(thread, "thread is already running")
            op = self._operation_id(payload.operation_id)
            already = prepare(thread, op)
        result: dict[str, Any] = {
            "threadId": thread.thread_id,
            "prepared": True,
            "alreadyPrepared": already,
        }
        if op is not None:
            result["operationId"] = op
        return result

    def _end_thread(self, request: Request) -> Any:
        payload = p.decode(p.ThreadPayload, request.type, request.payload)
        self.thread_for(request, payload.thread_id).end()
        return {}

    def _abort_session_setup(self, request: Request) -> Any:
        payload = p.decode(p.ThreadPayload, request.type, request.payload)
        if self.find_thread(payload.thread_id) is None:
            return {}
        self.thread_for(request, payload.thread_id).end()
        return {}

    def _resume_thread(self, request: Request) -> Any:
        payload = p.decode(p.ThreadPayload, request.type, request.payload)
        return self.thread_for(request, payload.thread_id).resume()

    def _thread_snapshot(self, request: Request) -> Any:
        payload = p.decode(p.ThreadPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        with thread.lock:
            return thread.snapshot()

    def _submit_tool_result(self, request: Request) -> Any:
        payload = p.decode(p.SubmitToolResultPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        if thread.submit(payload.request_id, payload.result):
            return {}
        with self.lock:
            others = [t for t in self.threads.values() if t is not thread]
        elsewhere = any(t.owns_tool_request(payload.request_id) for t in others)
        message = (
            "pending tool request does not belong to thread"
            if elsewhere
            else "pending tool request was not found"
        )
        raise CoreError(
            "PENDING_TOOL_REQUEST_NOT_FOUND",
            message,
            {"threadId": thread.thread_id, "requestId": payload.request_id},
        )

    def _tool_call(self, request: Request) -> Any:
        payload = p.decode(p.ToolCallPayload, request.type, request.payload)
        thread = self._thread_unchecked(payload.thread_id)
        return thread.call_tool(payload.tool_name, payload.args, self.stop)

    def _tool_spec(self, request: Request) -> Any:
        payload = p.decode(p.ToolSpecPayload, request.type, request.payload)
        thread = self._thread_unchecked(payload.thread_id)
        spec = thread.tools.get(payload.tool_name)
        if spec is None:
            raise CoreError(
                "TOOL_NOT_FOUND",
                "tool was not found",
                {"threadId": thread.thread_id, "toolName": payload.tool_name},
            )
        return spec.to_json()

    def _thread_unchecked(self, thread_id: str) -> DevThread:
        """The CLI-side types are not origin-checked (spec 3.6)."""
        thread = self.find_thread(thread_id)
        if thread is None:
            raise CoreError("THREAD_NOT_FOUND", "thread was not found", {"threadId": thread_id})
        return thread

    # --- assets ---------------------------------------------------------------------------

    def _list_assets(self, request: Request) -> Any:
        payload = p.decode(p.ThreadPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        self._check_open(thread)
        try:
            return {"assets": list_assets(thread.assets_dir)}
        except OSError as exc:
            raise CoreError(
                "ASSET_LIST_FAILED", "assets could not be listed", {"error": str(exc)}
            ) from None

    def _upload_ticket(
        self, owner: str, root: Path, filename: str, size: int, mime: str, target: str | None
    ) -> dict[str, Any]:
        check_filename(filename)
        if size > MAX_ASSET_BYTES:
            raise CoreError(
                "ASSET_TOO_LARGE",
                "asset exceeds the upload size limit",
                {"sizeBytes": size, "maxBytes": MAX_ASSET_BYTES},
            )
        shown = target if target is not None else "/" + filename
        segments = check_rooted_path(shown)
        if self.tickets.pending_upload(owner):
            raise CoreError("THREAD_BUSY", "an upload is already pending", {"owner": owner})
        return self.tickets.upload(
            owner, root.joinpath(*segments), size, shownPath=shown, mimeType=mime
        )

    def _create_asset_upload(self, request: Request) -> Any:
        payload = p.decode(p.AssetUploadPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        self._check_open(thread)
        return self._upload_ticket(
            thread.thread_id,
            thread.assets_dir,
            payload.filename,
            payload.size_bytes,
            payload.mime_type,
            payload.target_path,
        )

    def _create_asset_download(self, request: Request) -> Any:
        payload = p.decode(p.AssetDownloadPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        self._check_open(thread)
        segments = check_rooted_path(payload.path)
        return self.tickets.download(
            thread.thread_id, thread.assets_dir.joinpath(*segments), payload.path
        )

    # --- global ---------------------------------------------------------------------------

    def _list_providers(self, request: Request) -> Any:
        entries = []
        for code, name, programs in PROVIDERS:
            found = any(shutil.which(program) for program in programs)
            entry: dict[str, Any] = {
                "name": name,
                "code": code,
                "available": found,
                "error": None if found else f"{programs[0]} was not found on PATH",
            }
            if self.current:
                entry["isDefault"] = False
            entries.append(entry)
        return entries

    def _get_settings(self, request: Request) -> Any:
        return {"defaultProvider": None, "defaultModels": {}}

    def _ping(self, request: Request) -> Any:
        if not self.current:
            return {"connected": True}
        return {"connected": True, "version": self.settings.version, "processId": os.getpid()}

    # --- workspaces -----------------------------------------------------------------------

    def workspace_origin(self, request: Request) -> str:
        """Workspace operations need a valid origin (spec 9.6)."""
        if request.caller_origin is None:
            message = (
                "open_workspace requires an approved caller origin"
                if request.type == "open_workspace"
                else "workspace operation requires an approved caller origin"
            )
            raise CoreError("IPC_UNAUTHORIZED", message)
        origin = normalise_origin(request.caller_origin)
        if origin is None:
            raise CoreError("IPC_UNAUTHORIZED", "invalid caller origin")
        return origin

    def _open_workspace(self, request: Request) -> Any:
        payload = p.decode(p.OpenWorkspacePayload, request.type, request.payload)
        origin = self.workspace_origin(request)
        if payload.path is None:
            return {"workspace": None}
        if not isinstance(payload.path, str):
            raise CoreError("INVALID_INPUT", "open_workspace path must be a string")
        if not payload.path.strip():
            raise CoreError("INVALID_INPUT", "open_workspace path must not be empty")
        path = Path(payload.path)
        if not path.is_absolute() or not path.is_dir():
            raise CoreError(
                "WORKSPACE_PATH_INVALID",
                "workspace path must be an existing absolute directory",
                {"path": payload.path},
            )
        return {"workspace": self.workspaces.open(path, origin).to_json()}

    def _workspace_list(self, request: Request, *, folders: bool) -> Any:
        payload = p.decode(p.WorkspaceListPayload, request.type, request.payload)
        workspace = self.workspaces.get(payload.workspace_id, self.workspace_origin(request))
        return {"paths": list_paths(workspace, payload.path, folders=folders)}

    def _workspace_list_files(self, request: Request) -> Any:
        return self._workspace_list(request, folders=False)

    def _workspace_list_folders(self, request: Request) -> Any:
        return self._workspace_list(request, folders=True)

    def _workspace_run(self, request: Request) -> Any:
        payload = p.decode(p.WorkspaceRunPayload, request.type, request.payload)
        workspace = self.workspaces.get(payload.workspace_id, self.workspace_origin(request))
        return run_script(workspace, payload.script, payload.timeout_ms)

    def _create_workspace_file_upload(self, request: Request) -> Any:
        payload = p.decode(p.WorkspaceFileUploadPayload, request.type, request.payload)
        workspace = self.workspaces.get(payload.workspace_id, self.workspace_origin(request))
        return self._upload_ticket(
            workspace.workspace_id,
            workspace.path,
            payload.filename,
            payload.size_bytes,
            payload.mime_type,
            payload.target_path,
        )

    def _create_workspace_file_download(self, request: Request) -> Any:
        payload = p.decode(p.WorkspaceFileDownloadPayload, request.type, request.payload)
        workspace = self.workspaces.get(payload.workspace_id, self.workspace_origin(request))
        segments = check_rooted_path(payload.path)
        return self.tickets.download(
            workspace.workspace_id, workspace.path.joinpath(*segments), payload.path
        )

    def _deno_ticket(self, owner: str, module_name: str, size: int) -> dict[str, Any]:
        check_filename(module_name)
        if size > MAX_ASSET_BYTES:
            raise CoreError(
                "DENO_MODULE_TOO_LARGE", "deno module is too large", {"sizeBytes": size}
            )
        file = resolve_inside(
            self.data_dir / "deno-modules" / owner, module_name, "DENO_MODULE_NAME_INVALID"
        )
        return self.tickets.upload(owner, file, size, shownPath=module_name)

    def _create_deno_module_upload(self, request: Request) -> Any:
        payload = p.decode(p.DenoModuleUploadPayload, request.type, request.payload)
        thread = self.thread_for(request, payload.thread_id)
        self._check_open(thread)
        return self._deno_ticket(thread.thread_id, payload.module_name, payload.expected_size_bytes)

    def _create_workspace_deno_module_upload(self, request: Request) -> Any:
        payload = p.decode(p.WorkspaceDenoUploadPayload, request.type, request.payload)
        workspace = self.workspaces.get(payload.workspace_id, self.workspace_origin(request))
        return self._deno_ticket(
            workspace.workspace_id, payload.module_name, payload.expected_size_bytes
        )

    def _prepare_workspace_deno_modules(self, request: Request) -> Any:
        payload = p.decode(p.PrepareDenoModulesPayload, request.type, request.payload)
        workspace = self.workspaces.get(payload.workspace_id, self.workspace_origin(request))
        folder = self.data_dir / "deno-modules" / workspace.workspace_id
        missing = [name for name in payload.module_names if not (folder / name).is_file()]
        return {"missingModuleNames": missing}
