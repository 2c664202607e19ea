"""Thread assets and transfer tickets (spec 3.6; Workspace files and Deno modules, 9.8 item 7).

Bytes never cross the IPC: a ticket names a loopback URL plus a bearer token, served by
`transfer.TransferServer`.
"""

from __future__ import annotations

import mimetypes
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from native_host.devcore.wire import CoreError

MAX_ASSET_BYTES = 104_857_600
TICKET_TTL_MS = 300_000


def now_ms() -> int:
    """Wall-clock milliseconds, the unit of every `…At` field."""
    return int(time.time() * 1000)


def check_filename(name: str) -> None:
    """A bare file name: non-empty, no separators, not `.`/`..`, no control characters."""
    bad = not name.strip() or name in (".", "..") or any(ch in name for ch in "/\\")
    if bad or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise CoreError("INVALID_INPUT", "filename is invalid", {"filename": name})


def check_rooted_path(path: str) -> list[str]:
    """The segments of a `/`-rooted path: no empty, `.` or `..` segment, `\\` or control char."""
    segments = path[1:].split("/") if path.startswith("/") else []
    bad = not segments or any(seg in ("", ".", "..") for seg in segments) or "\\" in path
    if bad or any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise CoreError("ASSET_PATH_INVALID", "asset path is invalid", {"path": path})
    return segments


def list_assets(root: Path) -> list[dict[str, Any]]:
    """Regular files below `root`, newest first then by name; skips symlinks and `.pedelec-*`."""
    found: list[dict[str, Any]] = []
    if not root.is_dir():
        return found
    for entry in root.rglob("*"):
        relative = entry.relative_to(root)
        if any(part.startswith(".pedelec-") for part in relative.parts):
            continue
        if entry.is_symlink() or not entry.is_file():
            continue
        stat = entry.stat()
        found.append(
            {
                "name": entry.name,
                "path": "/" + relative.as_posix(),
                "sizeBytes": stat.st_size,
                "modifiedAt": int(stat.st_mtime * 1000),
            }
        )
    found.sort(key=lambda item: (-item["modifiedAt"], item["name"], item["path"]))
    return found


@dataclass
class Ticket:
    """One upload or download; `owner` is the thread or Workspace it belongs to."""

    ticket_id: str
    kind: str
    """`upload` or `download`."""
    token: str
    expires_at: int
    file: Path
    size_bytes: int
    owner: str
    done: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def live(self) -> bool:
        return not self.done and now_ms() < self.expires_at


class TicketBook:
    """Tickets by id; the transfer server redeems them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tickets: dict[str, Ticket] = {}
        self.base_url = "http://127.0.0.1:0"
        """Set by the transfer server once it listens."""

    def get(self, ticket_id: str) -> Ticket | None:
        with self._lock:
            return self._tickets.get(ticket_id)

    def pending_upload(self, owner: str) -> bool:
        """Whether `owner` still has an unexpired, unused upload ticket (THREAD_BUSY)."""
        with self._lock:
            return any(
                t.kind == "upload" and t.owner == owner and t.live() for t in self._tickets.values()
            )

    def upload(self, owner: str, file: Path, size_bytes: int, **extra: Any) -> dict[str, Any]:
        """Issue an upload ticket: `{uploadId, uploadUrl, token, expiresAt}`."""
        ticket = self._issue("upl_", "upload", owner, file, size_bytes, extra)
        return {
            "uploadId": ticket.ticket_id,
            "uploadUrl": f"{self.base_url}/uploads/{ticket.ticket_id}",
            "token": ticket.token,
            "expiresAt": ticket.expires_at,
        }

    def download(self, owner: str, file: Path, shown_path: str) -> dict[str, Any]:
        """Issue a download ticket with the file's metadata (spec 3.6)."""
        if not file.exists() or file.is_symlink():
            raise CoreError("ASSET_NOT_FOUND", "asset was not found", {"path": shown_path})
        if not file.is_file():
            raise CoreError("ASSET_NOT_FILE", "asset is not a file", {"path": shown_path})
        stat = file.stat()
        if stat.st_size > MAX_ASSET_BYTES:
            raise CoreError(
                "ASSET_READ_TOO_LARGE",
                "asset is too large to download",
                {"path": shown_path, "sizeBytes": stat.st_size, "maxBytes": MAX_ASSET_BYTES},
            )
        ticket = self._issue("dnl_", "download", owner, file, stat.st_size, {})
        mime, _ = mimetypes.guess_type(file.name)
        return {
            "downloadId": ticket.ticket_id,
            "downloadUrl": f"{self.base_url}/downloads/{ticket.ticket_id}",
            "token": ticket.token,
            "path": shown_path,
            "name": file.name,
            "sizeBytes": stat.st_size,
            "modifiedAt": int(stat.st_mtime * 1000),
            "mimeType": mime or "application/octet-stream",
            "expiresAt": ticket.expires_at,
        }

    def _issue(
        self, prefix: str, kind: str, owner: str, file: Path, size: int, extra: dict[str, Any]
    ) -> Ticket:
        ticket = Ticket(
            ticket_id=prefix + secrets.token_hex(4),
            kind=kind,
            token=secrets.token_hex(32),
            expires_at=now_ms() + TICKET_TTL_MS,
            file=file,
            size_bytes=size,
            owner=owner,
            extra=extra,
        )
        with self._lock:
            self._tickets[ticket.ticket_id] = ticket
        return ticket
