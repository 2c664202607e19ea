"""Current-generation extras (spec 9.8): snapshots, resume, Workspaces, tickets, legacy refusals."""

from __future__ import annotations

import os
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from native_host.devcore import DevCore
from native_host.devcore.engine import CURRENT_TYPES, LEGACY_TYPES
from tests.support.core_lines import (
    ORIGIN,
    ClientFactory,
    CoreFactory,
    LineClient,
    create_thread,
    subscribe,
)
from tests.support.markers import POSIX, needs_os

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("kind", sorted(CURRENT_TYPES - LEGACY_TYPES))
def test_legacy_refuses_newer_types(
    make_core: CoreFactory, connect: ClientFactory, kind: str
) -> None:
    client = connect(make_core("legacy"))
    assert client.error(kind, {"threadId": "t000001"}, origin=ORIGIN) == {
        "code": "IPC_UNAVAILABLE",
        "message": "unknown Core IPC request type",
        "details": {"type": kind},
    }


def test_legacy_ignores_new_fields(make_core: CoreFactory, connect: ClientFactory) -> None:
    client = connect(make_core("legacy"))
    result = client.result(
        "create_thread",
        {"provider": "codex", "effort": 5, "workspaceId": "ws_zzz"},
        callerSdkVersion="0.4.0",
    )
    assert result == {"threadId": "t000001"}
    assert client.result("ping") == {"connected": True}


@needs_os(*POSIX, reason="the providers found on PATH are #!/bin/sh files with the x bit")
def test_ping_and_list_providers(
    cc: LineClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert cc.result("ping") == {"connected": True, "version": "0.4.0", "processId": os.getpid()}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("codex", "cursor"):
        exe = bin_dir / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    entries = cc.result("list_providers")
    assert [(e["code"], e["name"]) for e in entries] == [
        ("codex", "Codex"),
        ("antigravity", "Antigravity"),
        ("opencode", "OpenCode"),
        ("cursor", "Cursor"),
        ("claude", "Claude Code"),
        ("ollama", "Ollama"),
    ]
    available = {e["code"]: e["available"] for e in entries}
    assert available == {
        "codex": True,
        "antigravity": False,
        "opencode": False,
        "cursor": True,
        "claude": False,
        "ollama": False,
    }
    assert entries[0]["error"] is None and isinstance(entries[1]["error"], str)
    assert cc.result("get_settings") == {"defaultProvider": None, "defaultModels": {}}


def test_managed_workspace_and_snapshot(
    cur: DevCore, cc: LineClient, connect: ClientFactory
) -> None:
    result = cc.result("create_thread", {"provider": "codex", "model": "gpt-5"}, origin=ORIGIN)
    thread_id, ws = result["threadId"], result["workspaceId"]
    assert result == {
        "threadId": thread_id,
        "workspaceId": ws,
        "workspacePath": None,
        "explicitModelConfigApplied": True,
    }
    _, sub = subscribe(cur, connect, thread_id, ORIGIN)
    assert sub == {
        "subscribed": True,
        "snapshot": {"threadId": thread_id, "workspaceId": ws, "status": "idle", "latestSeq": 2},
        "workspace": {"workspaceId": ws, "path": None},
    }
    listing = cc.result("workspace_list_files", {"workspaceId": ws}, origin=ORIGIN)
    assert listing == {"paths": []}
    plain = cc.result("create_thread", {"provider": "codex"})
    assert plain["explicitModelConfigApplied"] is False
    assert plain["workspaceId"] != ws


def test_snapshot_tracks_operations(cur: DevCore, cc: LineClient, connect: ClientFactory) -> None:
    thread_id = create_thread(cc)
    stream, _ = subscribe(cur, connect, thread_id)
    cc.result("send_text", {"threadId": thread_id, "message": "/sleep 300", "operationId": "op_a"})
    active = cc.result("thread_snapshot", {"threadId": thread_id})
    assert active["status"] == "running"
    assert active["activeOperation"]["operationId"] == "op_a"
    assert active["activeOperation"]["operationKind"] == "user"
    assert isinstance(active["activeOperation"]["startedAt"], int)
    stream.events(6)
    done = cc.result("thread_snapshot", {"threadId": thread_id})
    assert "activeOperation" not in done
    assert done["latestSeq"] == 8 and done["status"] == "idle"
    assert done["usage"] == {"totalTokens": 2 + 4}
    last = done["lastCompletedOperation"]
    assert last["operationId"] == "op_a" and last["success"] is True
    assert last["operationKind"] == "user" and isinstance(last["completedAt"], int)


def test_subscribe_never_forwards_seq_at_or_below_latest(
    cur: DevCore, cc: LineClient, connect: ClientFactory
) -> None:
    thread_id = create_thread(cc)
    cc.result("send_text", {"threadId": thread_id, "message": "/sleep 100"})
    stream, sub = subscribe(cur, connect, thread_id)
    latest = sub["snapshot"]["latestSeq"]
    first = stream.events(1)[0]
    assert first["seq"] == latest + 1


def test_resume_thread(cur: DevCore, cc: LineClient, connect: ClientFactory) -> None:
    thread_id = create_thread(cc, origin=ORIGIN)
    stream, _ = subscribe(cur, connect, thread_id, ORIGIN)
    idle = cc.result("resume_thread", {"threadId": thread_id}, origin=ORIGIN)
    assert idle["snapshot"]["status"] == "idle" and idle["snapshot"]["latestSeq"] == 2
    cc.result("send_text", {"threadId": thread_id, "message": "/sleep 2000"}, origin=ORIGIN)
    busy = cc.error("resume_thread", {"threadId": thread_id}, origin=ORIGIN)
    assert busy == {
        "code": "THREAD_BUSY",
        "message": "thread is already running",
        "details": {"threadId": thread_id},
    }
    cc.result("end_thread", {"threadId": thread_id}, origin=ORIGIN)
    denied = cc.error("resume_thread", {"threadId": thread_id}, origin="https://other.example.com")
    assert denied["code"] == "THREAD_ACCESS_DENIED"
    resumed = cc.result("resume_thread", {"threadId": thread_id}, origin=ORIGIN)["snapshot"]
    events = stream.events(6)
    assert [e["type"] for e in events[:5]] == [
        "status_changed",
        "status_changed",
        "operation_completed",
        "status_changed",
        "ended",
    ]
    assert events[-1] == {
        "type": "status_changed",
        "seq": resumed["latestSeq"],
        "threadId": thread_id,
        "status": "idle",
    }
    assert resumed["status"] == "idle"
    assert resumed["lastCompletedOperation"]["success"] is False
    assert resumed["lastCompletedOperation"]["error"]["code"] == "THREAD_ENDED"
    cc.result("send_text", {"threadId": thread_id, "message": "back"}, origin=ORIGIN)


def test_abort_session_setup(cur: DevCore, cc: LineClient, connect: ClientFactory) -> None:
    thread_id = create_thread(cc, origin=ORIGIN)
    stream, _ = subscribe(cur, connect, thread_id, ORIGIN)
    denied = cc.error("abort_session_setup", {"threadId": thread_id})
    assert denied["code"] == "THREAD_ACCESS_DENIED"
    assert cc.result("abort_session_setup", {"threadId": thread_id}, origin=ORIGIN) == {}
    assert [e["type"] for e in stream.events(3)] == ["status_changed", "status_changed", "ended"]
    assert cc.result("abort_session_setup", {"threadId": "t0000zz"}, origin=ORIGIN) == {}


def test_open_workspace(cur: DevCore, cc: LineClient, tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    (folder / "src" / "deep").mkdir(parents=True)
    (folder / "src" / "main.ts").write_text("x")
    (folder / "src" / "deep" / "b.txt").write_text("y")
    (folder / "README.md").write_text("z")
    os.symlink(folder / "README.md", folder / "link.md")
    opened = cc.result("open_workspace", {"path": str(folder)}, origin=ORIGIN)["workspace"]
    assert opened == {"workspaceId": opened["workspaceId"], "path": str(folder)}
    ws = opened["workspaceId"]
    assert cc.result("open_workspace", {"path": str(folder)}, origin=ORIGIN)["workspace"] == opened
    files = cc.result("workspace_list_files", {"workspaceId": ws, "path": "/"}, origin=ORIGIN)
    assert files == {"paths": ["README.md", "src/deep/b.txt", "src/main.ts"]}
    below = cc.result(
        "workspace_list_files", {"workspaceId": ws, "path": "/src/deep"}, origin=ORIGIN
    )
    assert below == {"paths": ["src/deep/b.txt"]}
    folders = cc.result("workspace_list_folders", {"workspaceId": ws}, origin=ORIGIN)
    assert folders == {"paths": ["src", "src/deep"]}
    bad = cc.error("workspace_list_files", {"workspaceId": ws, "path": "/../etc"}, origin=ORIGIN)
    assert bad["code"] == "WORKSPACE_PATH_INVALID"
    other = cc.error(
        "workspace_list_files", {"workspaceId": ws}, origin="https://other.example.com"
    )
    assert other["code"] == "WORKSPACE_ACCESS_DENIED"
    missing = cc.error("workspace_list_files", {"workspaceId": "ws_zzzzzz"}, origin=ORIGIN)
    assert missing["code"] == "WORKSPACE_NOT_FOUND"
    made = cc.result("create_thread", {"provider": "codex", "workspaceId": ws}, origin=ORIGIN)
    assert made["workspacePath"] == str(folder) and made["workspaceId"] == ws
    for origin, code in (
        (None, "WORKSPACE_ACCESS_DENIED"),
        ("https://other.example.com", "WORKSPACE_ACCESS_DENIED"),
    ):
        error = cc.error("create_thread", {"provider": "codex", "workspaceId": ws}, origin=origin)
        assert error["code"] == code


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        (5, "INVALID_INPUT", "open_workspace path must be a string"),
        ("  ", "INVALID_INPUT", "open_workspace path must not be empty"),
        ("relative/dir", "WORKSPACE_PATH_INVALID", None),
        ("/definitely/not/here", "WORKSPACE_PATH_INVALID", None),
    ],
)
def test_open_workspace_errors(
    cc: LineClient, path: object, code: str, message: str | None
) -> None:
    error = cc.error("open_workspace", {"path": path}, origin=ORIGIN)
    assert error["code"] == code
    if message is not None:
        assert error == {"code": code, "message": message}


def test_open_workspace_without_path_is_cancelled_picker(cc: LineClient) -> None:
    assert cc.result("open_workspace", {}, origin=ORIGIN) == {"workspace": None}
    missing_payload = cc.error("open_workspace", None, origin=ORIGIN)
    assert missing_payload["message"] == "Core IPC request payload had invalid shape"


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("open_workspace", {"path": "/"}),
        ("workspace_list_files", {"workspaceId": "ws_000001"}),
        ("workspace_list_folders", {"workspaceId": "ws_000001"}),
        ("workspace_run", {"workspaceId": "ws_000001", "script": "1"}),
        ("prepare_workspace_deno_modules", {"workspaceId": "ws_000001", "moduleNames": []}),
        (
            "create_workspace_deno_module_upload",
            {"workspaceId": "ws_000001", "moduleName": "m.js", "expectedSizeBytes": 1},
        ),
        (
            "create_workspace_file_upload",
            {"workspaceId": "ws_000001", "filename": "a", "sizeBytes": 1},
        ),
        ("create_workspace_file_download", {"workspaceId": "ws_000001", "path": "/a"}),
    ],
)
def test_workspace_operations_need_an_origin(
    cc: LineClient, kind: str, payload: dict[str, Any]
) -> None:
    create_thread(cc)
    message = (
        "open_workspace requires an approved caller origin"
        if kind == "open_workspace"
        else "workspace operation requires an approved caller origin"
    )
    assert cc.error(kind, payload) == {"code": "IPC_UNAUTHORIZED", "message": message}


def _http(method: str, url: str, token: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=body, method=method, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_assets_upload_list_download(
    make_core: CoreFactory, connect: ClientFactory, generation: str
) -> None:
    core = make_core(generation)
    client = connect(core)
    thread_id = create_thread(client, origin=ORIGIN)
    payload = {
        "threadId": thread_id,
        "filename": "notes.txt",
        "sizeBytes": 5,
        "mimeType": "text/plain",
    }
    ticket = client.result("create_asset_upload", payload, origin=ORIGIN)
    assert set(ticket) == {"uploadId", "uploadUrl", "token", "expiresAt"}
    assert ticket["uploadId"].startswith("upl_") and len(ticket["uploadId"]) == 12
    assert ticket["uploadUrl"].startswith("http://127.0.0.1:") and ticket["uploadUrl"].endswith(
        "/uploads/" + ticket["uploadId"]
    )
    assert int(ticket["token"], 16) >= 0
    busy = client.error("create_asset_upload", payload, origin=ORIGIN)
    assert busy["code"] == "THREAD_BUSY"
    assert _http("PUT", ticket["uploadUrl"], "wrong", b"hello")[0] == 401
    assert _http("PUT", ticket["uploadUrl"], ticket["token"], b"hell")[0] == 400
    assert _http("PUT", ticket["uploadUrl"], ticket["token"], b"hello")[0] == 200
    assert _http("PUT", ticket["uploadUrl"], ticket["token"], b"hello")[0] == 410
    nested = client.result(
        "create_asset_upload", {**payload, "targetPath": "/dir/n.txt"}, origin=ORIGIN
    )
    assert _http("PUT", nested["uploadUrl"], nested["token"], b"12345")[0] == 200
    assets_dir = core.settings.home / "dev-core" / "threads" / thread_id / "assets"
    (assets_dir / ".pedelec-tmp").write_text("hidden")
    os.symlink(assets_dir / "notes.txt", assets_dir / "link.txt")
    os.utime(assets_dir / "notes.txt", (1_700_000_000, 1_700_000_000))
    listed = client.result("list_assets", {"threadId": thread_id}, origin=ORIGIN)["assets"]
    assert [(a["name"], a["path"], a["sizeBytes"]) for a in listed] == [
        ("n.txt", "/dir/n.txt", 5),
        ("notes.txt", "/notes.txt", 5),
    ]
    assert listed[1]["modifiedAt"] == 1_700_000_000_000
    download = client.result(
        "create_asset_download", {"threadId": thread_id, "path": "/notes.txt"}, origin=ORIGIN
    )
    assert download["downloadId"].startswith("dnl_")
    assert {k: download[k] for k in ("path", "name", "sizeBytes", "mimeType")} == {
        "path": "/notes.txt",
        "name": "notes.txt",
        "sizeBytes": 5,
        "mimeType": "text/plain",
    }
    assert _http("GET", download["downloadUrl"], download["token"]) == (200, b"hello")


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"filename": "", "sizeBytes": 1}, "INVALID_INPUT"),
        ({"filename": "a/b", "sizeBytes": 1}, "INVALID_INPUT"),
        ({"filename": "..", "sizeBytes": 1}, "INVALID_INPUT"),
        ({"filename": "a", "sizeBytes": 104_857_601}, "ASSET_TOO_LARGE"),
        ({"filename": "a", "sizeBytes": 1, "targetPath": "rel"}, "ASSET_PATH_INVALID"),
        ({"filename": "a", "sizeBytes": 1, "targetPath": "/a//b"}, "ASSET_PATH_INVALID"),
        ({"filename": "a", "sizeBytes": 1, "targetPath": "/a/../b"}, "ASSET_PATH_INVALID"),
        ({"filename": "a", "sizeBytes": 1, "targetPath": "/a\\b"}, "ASSET_PATH_INVALID"),
        ({"filename": "a", "sizeBytes": 1, "targetPath": "/a\nb"}, "ASSET_PATH_INVALID"),
    ],
)
def test_asset_upload_errors(client: LineClient, payload: dict[str, Any], code: str) -> None:
    thread_id = create_thread(client)
    assert client.error("create_asset_upload", {"threadId": thread_id, **payload})["code"] == code


def test_asset_download_errors(core: DevCore, client: LineClient) -> None:
    thread_id = create_thread(client)
    (core.settings.home / "dev-core" / "threads" / thread_id / "assets" / "d").mkdir()
    for path, code in (
        ("/nope", "ASSET_NOT_FOUND"),
        ("/d", "ASSET_NOT_FILE"),
        ("x", "ASSET_PATH_INVALID"),
    ):
        assert (
            client.error("create_asset_download", {"threadId": thread_id, "path": path})["code"]
            == code
        )
    client.result("end_thread", {"threadId": thread_id})
    for kind in ("create_asset_download", "create_asset_upload"):
        error = client.error(
            kind, {"threadId": thread_id, "path": "/a", "filename": "a", "sizeBytes": 1}
        )
        assert error["code"] == "THREAD_ENDED"


def test_workspace_and_deno_tickets(cc: LineClient, tmp_path: Path) -> None:
    ws = cc.result("open_workspace", {"path": str(tmp_path)}, origin=ORIGIN)["workspace"][
        "workspaceId"
    ]
    up = cc.result(
        "create_workspace_file_upload",
        {
            "workspaceId": ws,
            "filename": "f.txt",
            "sizeBytes": 2,
            "mimeType": "",
            "targetPath": "/sub/f.txt",
        },
        origin=ORIGIN,
    )
    assert _http("PUT", up["uploadUrl"], up["token"], b"hi")[0] == 200
    assert (tmp_path / "sub" / "f.txt").read_bytes() == b"hi"
    down = cc.result(
        "create_workspace_file_download", {"workspaceId": ws, "path": "/sub/f.txt"}, origin=ORIGIN
    )
    assert down["path"] == "/sub/f.txt" and down["sizeBytes"] == 2
    assert _http("GET", down["downloadUrl"], down["token"]) == (200, b"hi")
    names = {"workspaceId": ws, "moduleNames": ["a.js", "b.js"]}
    assert cc.result("prepare_workspace_deno_modules", names, origin=ORIGIN) == {
        "missingModuleNames": ["a.js", "b.js"]
    }
    mod = cc.result(
        "create_workspace_deno_module_upload",
        {"workspaceId": ws, "moduleName": "a.js", "expectedSizeBytes": 3},
        origin=ORIGIN,
    )
    assert set(mod) == {"uploadId", "uploadUrl", "token", "expiresAt"}
    assert _http("PUT", mod["uploadUrl"], mod["token"], b"1;\n")[0] == 200
    assert cc.result("prepare_workspace_deno_modules", names, origin=ORIGIN) == {
        "missingModuleNames": ["b.js"]
    }
    thread_id = create_thread(cc, origin=ORIGIN)
    thread_mod = cc.result(
        "create_deno_module_upload",
        {"threadId": thread_id, "moduleName": "m.js", "expectedSizeBytes": 1},
        origin=ORIGIN,
    )
    assert thread_mod["uploadId"].startswith("upl_")
    denied = cc.error(
        "create_deno_module_upload",
        {"threadId": thread_id, "moduleName": "m.js", "expectedSizeBytes": 1},
    )
    assert denied["code"] == "THREAD_ACCESS_DENIED"
