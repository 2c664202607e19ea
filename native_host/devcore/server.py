"""The dev Core process: loopback listener, connections and runtime.json (faults: faults.py)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from native_host.devcore.engine import Engine
from native_host.devcore.envelope import EnvelopeError, Request, parse_envelope
from native_host.devcore.faults import FaultInjector, Faults
from native_host.devcore.record import RecordedRequest, Recorder
from native_host.devcore.settings import DevCoreSettings
from native_host.devcore.streams import Subscriber
from native_host.devcore.threads import DevThread
from native_host.devcore.transfer import TransferServer
from native_host.devcore.wire import (
    PROTOCOL,
    CoreError,
    LineReader,
    LineTooLong,
    dumps,
    error_response,
    ok_response,
)

RUNTIME_FILE = "runtime.json"
DEV_CORE_MARKER = "devCore"
"""A `runtime.json` key only the dev Core writes: `dev-core` may replace such a file."""
_TOO_LARGE = {
    "requestId": "",
    "ok": False,
    "error": {"code": "MESSAGE_TOO_LARGE", "message": "Core IPC message exceeds size limit"},
}


class _Connection:
    """One accepted TCP connection; may become one or more subscription streams."""

    def __init__(self, sock: socket.socket, connection_id: int) -> None:
        self.sock = sock
        self.id = connection_id
        self._send_lock = threading.Lock()
        self.closed_by_core = False
        self.hung = False
        """A hang fault fired: keep reading and recording, never answer again."""
        self.streams: list[Subscriber] = []

    def send(self, data: bytes) -> bool:
        """Write one complete line; False once the connection is gone."""
        with self._send_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                return False
        return True

    def send_json(self, obj: Any) -> bool:
        return self.send(dumps(obj) + b"\n")

    def close_from_core(self) -> None:
        """Close from the Core side; the reader then ends without counting a client EOF."""
        self.closed_by_core = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class DevCore:
    """A `pedelec-core-ipc-v1` peer for tests, the demo and SDK developers.

    `start()` listens on 127.0.0.1 and writes `runtime.json`; `stop()` is the clean exit,
    `crash()` the abrupt one. Usable as a context manager.
    """

    def __init__(self, settings: DevCoreSettings | None = None) -> None:
        self.settings = settings or DevCoreSettings()
        self._stop = threading.Event()
        self.engine = Engine(self.settings, self._stop)
        self._injector = FaultInjector(
            lambda: self.settings.faults,
            self.engine.channel,
            self._stop,
            self.crash,
            current=self.engine.current,
            hard_exit=self.settings.hard_exit,
        )
        self._recorder = Recorder(self.settings.record_file)
        self._lock = threading.Lock()
        self._connections: dict[int, _Connection] = {}
        self._connection_count = 0
        self._eof_connections = 0
        self._stream_eofs: dict[str, int] = {}
        self._listener: socket.socket | None = None
        self._transfer: TransferServer | None = None
        self.port = 0

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def runtime_path(self) -> Path:
        return self.settings.home / RUNTIME_FILE

    @property
    def faults(self) -> Faults:
        """The active faults; assign a new `Faults` to change them while running."""
        return self.settings.faults

    @faults.setter
    def faults(self, value: Faults) -> None:
        self.settings.faults = value

    def start(self) -> DevCore:
        """Bind, serve in background threads and publish `runtime.json`."""
        shutil.rmtree(self.engine.data_dir, ignore_errors=True)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if os.name == "posix":
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.settings.port))
        listener.listen(64)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._transfer = TransferServer(self.engine.tickets)
        self._transfer.start()
        threading.Thread(target=self._accept_loop, name="devcore-accept", daemon=True).start()
        self._write_runtime()
        return self

    def stop(self) -> None:
        """Clean exit: close everything and remove `runtime.json` if it is still ours."""
        self._shutdown()
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(self.runtime_path.read_text(encoding="utf-8"))
            if data.get("endpoint") == self.endpoint and data.get("pid") == os.getpid():
                self.runtime_path.unlink()

    def crash(self) -> None:
        """Abrupt exit: listener and every connection close at once; `runtime.json` stays."""
        self._shutdown()

    def __enter__(self) -> DevCore:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _shutdown(self) -> None:
        self._stop.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._transfer is not None:
            self._transfer.stop()
            self._transfer = None
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:
            connection.close_from_core()

    def _write_runtime(self) -> None:
        """Atomic (temp file + rename) and private (0600), unlike the real app (spec 3.1)."""
        home = self.settings.home
        home.mkdir(parents=True, exist_ok=True)
        data = {
            "protocol": PROTOCOL,
            "host": "127.0.0.1",
            "port": self.port,
            "endpoint": self.endpoint,
            "pid": os.getpid(),
            DEV_CORE_MARKER: True,
        }
        fd, temp = tempfile.mkstemp(dir=home, prefix=".runtime.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, self.runtime_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    # --- observation helpers for tests -----------------------------------------------------

    @property
    def record(self) -> list[RecordedRequest]:
        """Every request line received so far, in order (a copy)."""
        return self._recorder.snapshot()

    def requests(self, type: str | None = None) -> list[RecordedRequest]:
        """The record filtered by envelope type."""
        return [r for r in self.record if type is None or r.type == type]

    @property
    def connection_count(self) -> int:
        with self._lock:
            return self._connection_count

    @property
    def eof_connections(self) -> int:
        """Connections of any kind that ended because the client closed them."""
        with self._lock:
            return self._eof_connections

    def stream_eofs(self, thread_id: str | None = None) -> int:
        """Subscription connections the client closed (all threads, or one)."""
        with self._lock:
            if thread_id is None:
                return sum(self._stream_eofs.values())
            return self._stream_eofs.get(thread_id, 0)

    def wait_for(self, predicate: Callable[[DevCore], bool], timeout: float = 5.0) -> bool:
        """Poll `predicate(self)` until it holds or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    @property
    def gated(self) -> int:
        """Requests held at the gate (`gate_types`) right now."""
        return self._injector.gated

    def open_gate(self) -> None:
        """Release every request held by `gate_types`, and let later ones through."""
        self._injector.open_gate()

    def thread(self, thread_id: str) -> DevThread | None:
        """The Core thread with this id, for tests that inspect state directly."""
        return self.engine.find_thread(thread_id)

    # --- stream control for tests --------------------------------------------------------

    def inject_stream_line(self, thread_id: str, line: bytes) -> None:
        """Write raw bytes plus a newline on every live stream of the thread, in event order."""
        for subscriber in self.engine.channel(thread_id).subscribers():
            subscriber.enqueue_raw(line + b"\n")

    def emit_event(self, thread_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """Emit `event` (without `seq`/`threadId`) through the thread's seq counter."""
        fields = {k: v for k, v in event.items() if k not in ("type", "seq", "threadId")}
        return self.engine.channel(thread_id).emit(str(event["type"]), fields)

    def close_streams(self, thread_id: str | None = None) -> None:
        """Close subscription connections from the Core side (all, or one thread's)."""
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:
            if any(thread_id in (None, s.thread_id) for s in connection.streams):
                connection.close_from_core()

    # --- serving --------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stop.is_set():
            try:
                readable, _, _ = select.select([listener], [], [], 0.5)
                if not readable:
                    continue
                sock, _ = listener.accept()
            except (OSError, ValueError):
                return
            with self._lock:
                self._connection_count += 1
                if self._injector.close_on_accept():
                    sock.close()
                    continue
                connection = _Connection(sock, self._connection_count)
                self._connections[connection.id] = connection
            if self._stop.is_set():
                connection.close_from_core()
                return
            threading.Thread(
                target=self._serve, args=(connection,), name="devcore-conn", daemon=True
            ).start()

    def _serve(self, connection: _Connection) -> None:
        """Read requests until EOF and answer them in order (spec 3.3)."""
        reader = LineReader(connection.sock)
        client_closed = False
        try:
            while True:
                try:
                    line = reader.read_line()
                except LineTooLong as exc:
                    self._too_large(connection, exc.seen)
                    return
                except OSError:
                    client_closed = not connection.closed_by_core
                    return
                if line is None:
                    client_closed = not connection.closed_by_core
                    return
                self._recorder.add(RecordedRequest.from_line(connection.id, line, time.time()))
                if not connection.hung and not self._process(connection, line):
                    return
        finally:
            self._finish(connection, client_closed)

    def _finish(self, connection: _Connection, client_closed: bool) -> None:
        for subscriber in connection.streams:
            self.engine.channel(subscriber.thread_id).remove(subscriber)
            subscriber.stop()
        with self._lock:
            self._connections.pop(connection.id, None)
            if client_closed:
                self._eof_connections += 1
                for subscriber in connection.streams:
                    tid = subscriber.thread_id
                    self._stream_eofs[tid] = self._stream_eofs.get(tid, 0) + 1
        if not connection.closed_by_core:
            connection.closed_by_core = True
            connection.sock.close()

    def _too_large(self, connection: _Connection, seen: int) -> None:
        """Reply MESSAGE_TOO_LARGE and close; drain briefly so the reply is not lost to a reset."""
        self._recorder.add(
            RecordedRequest.from_line(connection.id, b"", time.time(), oversize_bytes=seen)
        )
        connection.send_json(_TOO_LARGE)
        connection.closed_by_core = True
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_WR)
            connection.sock.settimeout(1.0)
            while connection.sock.recv(65_536):
                pass
        connection.sock.close()

    def _reply(self, connection: _Connection, request_id: str, outcome: Any) -> None:
        rid = self._injector.stamp(request_id)
        if isinstance(outcome, CoreError):
            connection.send_json(error_response(rid, outcome))
        else:
            connection.send_json(ok_response(rid, outcome))

    def _process(self, connection: _Connection, line: bytes) -> bool:
        """Answer one line; False when the connection must not be read any further."""
        try:
            request = parse_envelope(line)
        except EnvelopeError as exc:
            self._reply(connection, exc.request_id, exc.error)
            return True
        faulted = self._injector.intercept(connection, request)
        if faulted is not None:
            return faulted
        try:
            if request.type == "subscribe_thread" and self.engine.known(request.type):
                self._subscribe(connection, request)
                return True
            result = self.engine.handle(request)
        except CoreError as exc:
            self._reply(connection, request.request_id, exc)
            return True
        self._reply(connection, request.request_id, result)
        return True

    def _subscribe(self, connection: _Connection, request: Request) -> None:
        """Register the stream, then answer; events queued meanwhile follow the answer."""
        _, thread = self.engine.subscribe(request)
        subscriber = self._injector.open_stream(connection, thread.thread_id)
        with thread.lock:
            result = self.engine.subscribe_result(thread)
            early = self._injector.early_event(thread)
            thread.channel.add(subscriber)
        if early is not None:
            connection.send_json({"type": "thread_event", "event": early})
        self._reply(connection, request.request_id, result)
        self._injector.start_stream(connection, subscriber)
