"""Talking to a Core directly: one line client per connection, and the requests most
dev Core tests start with. The dev Core's own tests use it without a host in between."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from native_host.devcore import DevCore

ORIGIN = "https://app.example.com"
COUNTER_TOOL = {
    "name": "update_counter",
    "description": "Add delta to the counter.",
    "argsSchema": {
        "type": "object",
        "properties": {"delta": {"type": "integer"}},
        "required": ["delta"],
    },
}


class LineClient:
    """One TCP connection speaking newline-delimited JSON, with short timeouts."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._buf = b""
        self._counter = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, envelope: dict[str, Any]) -> None:
        self.send_raw(json.dumps(envelope, ensure_ascii=False).encode() + b"\n")

    def read_raw(self) -> bytes | None:
        """The next line without its newline, or None at EOF."""
        while b"\n" not in self._buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def read(self) -> Any:
        line = self.read_raw()
        assert line is not None, "connection closed by the dev Core"
        return json.loads(line)

    def request(
        self,
        type: str,
        payload: Any = None,
        *,
        origin: str | None = None,
        request_id: str | None = None,
        **envelope: Any,
    ) -> dict[str, Any]:
        """Send one request and read its response line."""
        self._counter += 1
        env: dict[str, Any] = {"requestId": request_id or f"r{self._counter}", "type": type}
        if payload is not None:
            env["payload"] = payload
        if origin is not None:
            env["callerOrigin"] = origin
        env.update(envelope)
        self.send(env)
        response: dict[str, Any] = self.read()
        return response

    def result(self, type: str, payload: Any = None, **kw: Any) -> Any:
        """Send a request that must succeed; its result."""
        response = self.request(type, payload, **kw)
        assert response["ok"] is True, response
        return response["result"]

    def error(self, type: str, payload: Any = None, **kw: Any) -> dict[str, Any]:
        """Send a request that must fail; its error object."""
        response = self.request(type, payload, **kw)
        assert response["ok"] is False, response
        error: dict[str, Any] = response["error"]
        return error

    def events(self, count: int) -> list[dict[str, Any]]:
        """The next `count` thread events on a stream."""
        out = []
        for _ in range(count):
            line = self.read()
            assert line["type"] == "thread_event", line
            out.append(line["event"])
        return out

    def wait_eof(self) -> bool:
        """True once the Core closed the connection (within the socket timeout)."""
        try:
            while True:
                line = self.read_raw()
                if line is None:
                    return True
        except (TimeoutError, ConnectionResetError):
            return False

    def close(self) -> None:
        self.sock.close()


CoreFactory = Callable[..., DevCore]
ClientFactory = Callable[[DevCore], LineClient]


def create_thread(client: LineClient, origin: str | None = None, **payload: Any) -> str:
    """Create a codex thread (tools: update_counter) and return its id."""
    body = {"provider": "codex", "skills": {"guidance": "Use tools.", "tools": [COUNTER_TOOL]}}
    body.update(payload)
    result = client.result("create_thread", body, origin=origin)
    thread_id: str = result["threadId"]
    return thread_id


def subscribe(
    core: DevCore, connect: ClientFactory, thread_id: str, origin: str | None = None
) -> tuple[LineClient, Any]:
    """Open a stream; returns the stream client and the subscribe result."""
    stream = connect(core)
    result = stream.result("subscribe_thread", {"threadId": thread_id}, origin=origin)
    return stream, result
