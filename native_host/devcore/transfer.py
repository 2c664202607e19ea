"""Loopback HTTP server that redeems tickets: `PUT /uploads/<id>`, `GET /downloads/<id>`.

Authorisation is `Authorization: Bearer <token>`. Errors are JSON `{"error":{code,message}}`
with the asset codes of spec 6.
"""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from native_host.devcore.assets import Ticket, TicketBook, now_ms

_CHUNK = 65_536


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the dev Core's stdout belongs to its banner line."""

    def do_PUT(self) -> None:
        ticket = self._redeem("uploads", "upload")
        if ticket is None:
            return
        length = int(self.headers.get("Content-Length") or -1)
        if length != ticket.size_bytes:
            self._error(400, "ASSET_UPLOAD_SIZE_MISMATCH", "upload size does not match ticket")
            return
        ticket.file.parent.mkdir(parents=True, exist_ok=True)
        with ticket.file.open("wb") as handle:
            remaining = length
            while remaining:
                chunk = self.rfile.read(min(_CHUNK, remaining))
                if not chunk:
                    self._error(400, "ASSET_UPLOAD_FAILED", "upload body ended early")
                    return
                handle.write(chunk)
                remaining -= len(chunk)
        ticket.done = True
        self._json(200, {"path": ticket.extra.get("shownPath"), "sizeBytes": length})

    def do_GET(self) -> None:
        ticket = self._redeem("downloads", "download")
        if ticket is None:
            return
        try:
            handle = ticket.file.open("rb")
        except OSError as exc:
            self._error(404, "ASSET_READ_FAILED", str(exc))
            return
        with handle:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(ticket.file.stat().st_size))
            self.end_headers()
            shutil.copyfileobj(handle, self.wfile)

    def _redeem(self, collection: str, kind: str) -> Ticket | None:
        prefix = "ASSET_UPLOAD" if kind == "upload" else "ASSET_DOWNLOAD"
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        ticket = None
        if len(parts) == 2 and parts[0] == collection:
            ticket = self.server.book.get(parts[1])
        if ticket is None or ticket.kind != kind:
            self._error(404, f"{prefix}_UNAUTHORIZED", "unknown ticket")
            return None
        if self.headers.get("Authorization") != f"Bearer {ticket.token}":
            self._error(401, f"{prefix}_UNAUTHORIZED", "ticket token does not match")
            return None
        if ticket.done or now_ms() >= ticket.expires_at:
            self._error(410, f"{prefix}_TICKET_EXPIRED", "ticket has expired")
            return None
        return ticket

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"error": {"code": code, "message": message}})

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, book: TicketBook) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.book = book


class TransferServer:
    """Serves the tickets of one `TicketBook` on an ephemeral loopback port."""

    def __init__(self, book: TicketBook) -> None:
        self._server = _Server(book)
        self.port: int = self._server.server_address[1]
        book.base_url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="devcore-transfer",
            daemon=True,
        ).start()

    def stop(self) -> None:
        """Stop serving and free the port; never blocks on in-flight transfers."""
        threading.Thread(target=self._shutdown, daemon=True).start()

    def _shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
