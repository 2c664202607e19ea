"""Workspaces of the current generation (spec 9.8 item 6) on real directories."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from native_host.devcore.wire import CoreError

RUN_DEFAULT_TIMEOUT_MS = 60_000
RUN_OUTPUT_LIMIT = 256 * 1024
"""Each of stdout and stderr is cut to this many bytes, with its `…Truncated` flag set."""


def base36_id(prefix: str, number: int) -> str:
    """`prefix` + lowercase base36, zero-padded to 6 digits (spec 3.10)."""
    digits = ""
    while number:
        number, rest = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[rest] + digits
    return prefix + digits.rjust(6, "0")


@dataclass
class Workspace:
    """A directory the Core lets a caller's threads work in."""

    workspace_id: str
    path: Path
    managed: bool
    origin: str | None
    """The owner origin; None (an unowned thread's managed Workspace) is open to any origin."""

    def to_json(self) -> dict[str, Any]:
        """`{workspaceId, path}`; a managed Workspace's path is `null` (spec 9.3)."""
        return {"workspaceId": self.workspace_id, "path": None if self.managed else str(self.path)}


class WorkspaceRegistry:
    """Every Workspace of this Core process, managed or opened."""

    def __init__(self, managed_root: Path) -> None:
        self._root = managed_root
        self._lock = threading.Lock()
        self._items: dict[str, Workspace] = {}
        self._counter = 0

    def _next_id(self) -> str:
        self._counter += 1
        return base36_id("ws_", self._counter)

    def create_managed(self, origin: str | None) -> Workspace:
        """A fresh directory under the dev Core's own data dir."""
        with self._lock:
            workspace_id = self._next_id()
            path = self._root / workspace_id
            path.mkdir(parents=True, exist_ok=True)
            workspace = Workspace(workspace_id, path, True, origin)
            self._items[workspace_id] = workspace
            return workspace

    def open(self, path: Path, origin: str) -> Workspace:
        """Open (or reopen) an explicit directory for `origin`."""
        with self._lock:
            for workspace in self._items.values():
                if not workspace.managed and workspace.path == path and workspace.origin == origin:
                    return workspace
            workspace = Workspace(self._next_id(), path, False, origin)
            self._items[workspace.workspace_id] = workspace
            return workspace

    def get(self, workspace_id: str, origin: str) -> Workspace:
        """The Workspace, or `WORKSPACE_NOT_FOUND` / `WORKSPACE_ACCESS_DENIED`."""
        with self._lock:
            workspace = self._items.get(workspace_id)
        if workspace is None:
            raise CoreError(
                "WORKSPACE_NOT_FOUND", "workspace was not found", {"workspaceId": workspace_id}
            )
        if workspace.origin is not None and workspace.origin != origin:
            raise CoreError(
                "WORKSPACE_ACCESS_DENIED",
                "workspace is not accessible to this caller",
                {"workspaceId": workspace_id},
            )
        return workspace


def resolve_inside(root: Path, rooted: str | None, code: str = "WORKSPACE_PATH_INVALID") -> Path:
    """`rooted` ("/a/b", "a/b" or None) as a path below `root`; `..` and `\\` are refused."""
    text = rooted or "/"
    parts = PurePosixPath(text).parts
    bad = any(part in ("..", ".") for part in text.split("/")) or "\\" in text
    if bad or any(ord(ch) < 32 for ch in text):
        raise CoreError(code, "path is invalid", {"path": text})
    return root.joinpath(*[part for part in parts if part != "/"])


def list_paths(workspace: Workspace, rooted: str | None, *, folders: bool) -> list[str]:
    """Workspace-relative, `/`-separated, sorted paths of the files (or folders) below `rooted`."""
    base = resolve_inside(workspace.path, rooted)
    if not base.is_dir():
        raise CoreError("WORKSPACE_PATH_INVALID", "path is not a directory", {"path": rooted})
    found: list[str] = []
    for directory, dirnames, filenames in os.walk(base):
        here = Path(directory)
        for name in dirnames if folders else filenames:
            entry = here / name
            if not entry.is_symlink():
                found.append(entry.relative_to(workspace.path).as_posix())
    return sorted(found)


def run_script(workspace: Workspace, script: str, timeout_ms: int | None) -> dict[str, Any]:
    """Run `script` with `deno eval` in the Workspace (spec 9.8 item 6)."""
    deno = shutil.which("deno")
    if deno is None:
        raise CoreError("DENO_RUNTIME_UNAVAILABLE", "deno runtime is not available")
    limit_ms = timeout_ms or RUN_DEFAULT_TIMEOUT_MS
    try:
        process = subprocess.Popen(
            [deno, "eval", script],
            cwd=workspace.path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=os.name == "posix",
        )
    except OSError as exc:
        raise CoreError(
            "DENO_RUNTIME_UNAVAILABLE", "deno runtime could not start", {"error": str(exc)}
        ) from None
    try:
        stdout, stderr = process.communicate(timeout=limit_ms / 1000)
    except subprocess.TimeoutExpired:
        _kill_tree(process)
        raise CoreError(
            "DENO_EXECUTION_TIMEOUT", "workspace run timed out", {"timeoutMs": limit_ms}
        ) from None
    return {
        "exitCode": process.returncode,
        "stdout": stdout[:RUN_OUTPUT_LIMIT].decode("utf-8", errors="replace"),
        "stderr": stderr[:RUN_OUTPUT_LIMIT].decode("utf-8", errors="replace"),
        "stdoutTruncated": len(stdout) > RUN_OUTPUT_LIMIT,
        "stderrTruncated": len(stderr) > RUN_OUTPUT_LIMIT,
    }


def _kill_tree(process: subprocess.Popen[bytes]) -> None:
    """Kill the run and anything it started, so no orphan keeps the output pipes open."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    process.kill()
    process.communicate()
