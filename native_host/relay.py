"""The stdio relay: what Chrome runs on every `connectNative` (spec 1, 7).

The main thread only reads frames; every request runs on its own thread, so a slow
Core call, a launch or a subscription setup never delays another request (spec 7.1).
All output goes through one `Outbox`, which never writes a frame over 1 MiB.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from native_host import __version__, errors, messages
from native_host.config import HostConfig, load_config
from native_host.core.client import ConnectionRegistry, CoreClient, encode_line, parse_json
from native_host.core.discovery import CoreUnreachableError
from native_host.core.lines import MAX_LINE_BYTES
from native_host.errors import HostError
from native_host.framing import (
    MAX_FRAME_BYTES,
    FrameWriter,
    OversizeFrame,
    claim_stdout,
    encode_message,
    read_frame,
)
from native_host.logs import trace_body
from native_host.messages import NativeRequest

if TYPE_CHECKING:
    import socket

    from native_host.launcher import Launcher
    from native_host.policy import PolicyStore
    from native_host.subscriptions import Subscriptions

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FRAMING_LOST = 1
EXIT_EXTENSION_REFUSED = 2


class Outbox:
    """Everything the relay sends to the browser passes here: responses are capped."""

    def __init__(self, writer: FrameWriter) -> None:
        self.writer = writer

    def respond(self, request_id: str, kind: str | None, response: dict[str, Any]) -> None:
        """Write a response; one that would exceed 1 MiB becomes an error (spec 7.7, 9.4).

        If even that error cannot fit (a requestId of nearly 1 MiB), it goes out with
        requestId "": the extension could not have matched it anyway.
        """
        body = encode_message(response)
        if len(body) > MAX_FRAME_BYTES:
            log.warning("response %.64s (%s) of %d bytes replaced", request_id, kind, len(body))
            error = messages.oversize_response_error(kind or "", len(body)).to_error()
            body = encode_message(messages.error_response(request_id, error))
            if len(body) > MAX_FRAME_BYTES:
                body = encode_message(messages.error_response("", error))
        self.writer.write_body(body)

    def fail(self, request_id: str, kind: str | None, error: HostError) -> None:
        log.info(
            "request %s (%s) failed: %s at %s", request_id or '""', kind, error.code, error.stage
        )
        self.respond(request_id, kind, messages.error_response(request_id, error.to_error()))

    def send_body(self, body: bytes) -> bool:
        return self.writer.write_body(body)

    def send(self, message: dict[str, Any]) -> bool:
        """Write a host-made message; one that cannot fit (e.g. a thread id of nearly
        1 MiB echoed back) is dropped and logged rather than sent."""
        body = encode_message(message)
        if len(body) > MAX_FRAME_BYTES:
            log.warning("dropped a %s message of %d bytes", message.get("type"), len(body))
            return False
        return self.writer.write_body(body)


class Relay:
    """One host process's relay state: Core access, launches, subscriptions, policy."""

    def __init__(self, config: HostConfig, env: Mapping[str, str], outbox: Outbox) -> None:
        self.config = config
        self.env = env
        self.outbox = outbox
        self.stopping = threading.Event()
        self.registry = ConnectionRegistry()
        self.client = CoreClient(
            _pedelec_home(env),
            config.connect_timeout_ms,
            config.check_runtime_pid,
            self.registry,
        )
        self._lazy_lock = threading.Lock()
        self._launcher: Launcher | None = None
        self._policy: PolicyStore | None = None
        self._subscriptions: Subscriptions | None = None

    # --- lazily built collaborators (a ping never needs them) ------------------
    @property
    def launcher(self) -> Launcher:
        with self._lazy_lock:
            if self._launcher is None:
                from native_host.launcher import Launcher

                self._launcher = Launcher(
                    config=self.config,
                    env=self.env,
                    client=self.client,
                    is_shutting_down=self.stopping.is_set,
                )
            return self._launcher

    @property
    def policy(self) -> PolicyStore:
        with self._lazy_lock:
            if self._policy is None:
                from native_host.policy import PolicyStore

                self._policy = PolicyStore.for_env(self.env)
            return self._policy

    @property
    def subscriptions(self) -> Subscriptions:
        with self._lazy_lock:
            if self._subscriptions is None:
                from native_host.subscriptions import Subscriptions

                self._subscriptions = Subscriptions(self)
            return self._subscriptions

    # --- reading ----------------------------------------------------------------
    def serve(self, stdin: BinaryIO) -> int:
        """Read frames until EOF; returns the exit status (spec 7.13)."""
        while not self.stopping.is_set():
            try:
                frame = read_frame(stdin)
            except OSError as exc:
                log.info("stdin read failed: %s", exc)
                return EXIT_OK
            if frame is None:
                log.info("stdin closed")
                return EXIT_OK
            if isinstance(frame, OversizeFrame):
                self._reject_oversize(frame)
                if not frame.trusted:
                    return EXIT_FRAMING_LOST
                continue
            self.handle_body(frame)
        return EXIT_OK

    def _reject_oversize(self, frame: OversizeFrame) -> None:
        error = HostError(
            errors.MESSAGE_TOO_LARGE,
            errors.MSG_FRAME_TOO_LARGE,
            errors.STAGE_READ_FRAME,
            sizeBytes=frame.size,
        )
        self.outbox.fail(frame.request_id, None, error)

    def handle_body(self, body: bytes) -> None:
        """Handle one frame; nothing a frame contains can end the reading loop."""
        try:
            self._handle_body(body)
        except Exception:
            log.exception("frame of %d bytes could not be handled", len(body))
            internal = HostError(
                errors.IPC_UNAVAILABLE, errors.MSG_INTERNAL, errors.STAGE_PARSE_MESSAGE
            )
            self.outbox.fail("", None, internal)

    def _handle_body(self, body: bytes) -> None:
        """Parse and validate one frame in the reading thread, then dispatch (spec 1.4)."""
        try:
            message = parse_json(body)
        except (ValueError, UnicodeDecodeError) as exc:
            error = HostError(
                errors.IPC_UNAVAILABLE,
                errors.MSG_NOT_JSON,
                errors.STAGE_PARSE_MESSAGE,
                error=str(exc),
            )
            self.outbox.fail("", None, error)
            return
        request_id = ""
        kind: str | None = None
        try:
            if isinstance(message, dict):
                raw_id = message.get("requestId")
                request_id = raw_id if isinstance(raw_id, str) and raw_id.strip() else ""
            request = messages.validate_envelope(message)
            kind = request.type
            log.info("request %s %s (%d bytes)", request.request_id, request.type, len(body))
            trace_body(log, "request body", message)
            origin = self._check_origin(request)
            if request.type == "subscribe_thread":
                messages.check_subscribe_fields(request.message)
        except HostError as error:
            self.outbox.fail(request_id, kind, error)
            return
        if request.type in messages.HOST_LOCAL_TYPES:
            self._spawn(self._answer_host_local, request)
        elif request.type == "subscribe_thread":
            self._spawn(self.subscriptions.subscribe, request, origin)
        else:
            self._spawn(self._relay_request, request, origin)

    def _check_origin(self, request: NativeRequest) -> str | None:
        """Spec 1.4 step 4 / 7.11 (b, c): the normalised origin, or None when absent."""
        if not request.has_origin:
            return None
        from native_host.policy import host_local_request_error, validate_caller_origin

        value = request.message["callerOrigin"]
        if request.type in messages.HOST_LOCAL_TYPES:
            raise host_local_request_error(value)
        return validate_caller_origin(value, self.policy)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=self._guarded, args=(target, *args), daemon=True)
        thread.start()

    def _guarded(self, target: Any, request: NativeRequest, *args: Any) -> None:
        """Run one request; any failure answers that request and never ends the process."""
        try:
            target(request, *args)
        except HostError as error:
            if not self.stopping.is_set():
                self.outbox.fail(request.request_id, request.type, error)
        except Exception:
            log.exception("request %s (%s) crashed", request.request_id, request.type)
            if not self.stopping.is_set():
                internal = HostError(
                    errors.IPC_UNAVAILABLE,
                    errors.MSG_INTERNAL,
                    errors.STAGE_RELAY_RESPONSE,
                )
                self.outbox.fail(request.request_id, request.type, internal)

    # --- requests ---------------------------------------------------------------
    def _answer_host_local(self, request: NativeRequest) -> None:
        from native_host.policy import handle_host_local

        result = handle_host_local(request.message, self.policy)
        self.outbox.respond(
            request.request_id, request.type, messages.ok_response(request.request_id, result)
        )

    def core_line(self, envelope: dict[str, Any]) -> bytes:
        """Serialise a Core request before any discovery; refuse one over 1 MiB (spec 7.6)."""
        line = encode_line(envelope)
        if len(line) > MAX_LINE_BYTES:
            raise HostError(
                errors.MESSAGE_TOO_LARGE,
                errors.MSG_REQUEST_TOO_LARGE,
                errors.STAGE_SEND_REQUEST,
                sizeBytes=len(line),
            )
        return line

    def open_core(self) -> socket.socket:
        """Connect to the Core, launching the Desktop once if it is down (spec 7.5, 7.14)."""
        try:
            return self.client.connect()
        except CoreUnreachableError as first:
            log.info("Core unreachable (%s); launching the desktop app", first.stage)
        self.launcher.ensure_running()
        try:
            return self.client.connect()
        except CoreUnreachableError as again:
            raise again.to_host_error() from None

    def call_core(
        self,
        envelope: dict[str, Any],
        timeout_ms: int | None,
        stage: str = errors.STAGE_AWAIT_CORE_RESPONSE,
    ) -> dict[str, Any]:
        """One Core request on its own connection; the validated response."""
        line = self.core_line(envelope)
        sock = self.open_core()
        started = time.monotonic()
        response = self.client.exchange(sock, line, timeout_ms, stage)
        log.info(
            "core answered %s %s ok=%s in %.0f ms",
            envelope["requestId"],
            envelope["type"],
            response["ok"],
            (time.monotonic() - started) * 1000,
        )
        trace_body(log, "core response", response)
        if response["requestId"] != envelope["requestId"]:
            log.debug(
                "core answered %s with requestId %r", envelope["requestId"], response["requestId"]
            )
        return response

    def _relay_request(self, request: NativeRequest, origin: str | None) -> None:
        envelope = messages.core_envelope(request, origin)
        timeout_ms = messages.response_timeout_ms(
            request.type, envelope["payload"], self.config.core_response_timeout_ms
        )
        response = self.call_core(envelope, timeout_ms)
        if self.stopping.is_set():
            return
        self.outbox.respond(request.request_id, request.type, native_response(request, response))

    # --- lifetime ---------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop everything at once: no joins, no more frames (spec 7.13)."""
        self.stopping.set()
        self.outbox.writer.close()
        self.registry.close_all()


def _pedelec_home(env: Mapping[str, str]) -> Path | None:
    """The Pedelec home, or None when the OS cannot say where the user's home is."""
    from native_host import paths

    try:
        return paths.pedelec_home(env)
    except RuntimeError:
        log.warning("cannot resolve the user home directory")
        return None


def native_response(request: NativeRequest, response: dict[str, Any]) -> dict[str, Any]:
    """A Core response stamped with the native requestId (spec 7.2)."""
    if response["ok"]:
        return messages.ok_response(request.request_id, response["result"])
    return messages.error_response(request.request_id, response["error"])


def _refuse_extension(outbox: Outbox, extension_origin: str) -> int:
    from native_host.origins import extension_not_allowed_error

    error = extension_not_allowed_error(extension_origin)
    outbox.send(messages.error_response("", error.to_error()))
    return EXIT_EXTENSION_REFUSED


def run_relay(argv: Sequence[str], env: Mapping[str, str] = os.environ) -> int:
    """Relay mode: claim stdout, check the calling extension, serve until EOF, exit."""
    frames_fd = claim_stdout()
    config = load_config(env)
    from native_host.logs import setup_logging

    setup_logging(config.log_level, env)
    for problem in config.problems:
        log.warning("config: %s", problem)
    from native_host.origins import check_extension_origin, parse_extension_arg

    extension = parse_extension_arg(argv)
    log.info("start pid=%d version=%s extension=%s", os.getpid(), __version__, extension)
    relay_box: list[Relay] = []

    def on_broken() -> None:
        log.info("stdout closed; exiting")
        if relay_box:
            relay_box[0].shutdown()
        _exit(EXIT_OK)

    outbox = Outbox(FrameWriter(frames_fd, on_broken=on_broken))
    if extension is None:
        log.info("no extension origin in argv (sandboxed proxy?); continuing")
    elif not check_extension_origin(extension, config.allowed_extension_ids):
        log.warning("refusing extension %s", extension)
        return _exit(_refuse_extension(outbox, extension))
    relay = Relay(config, env, outbox)
    relay_box.append(relay)
    status = relay.serve(sys.stdin.buffer)
    relay.shutdown()
    return _exit(status)


def _exit(status: int) -> int:
    """Exit now, abandoning in-flight threads (spec 7.13)."""
    log.info("exit status=%d", status)
    logging.shutdown()
    os._exit(status)
