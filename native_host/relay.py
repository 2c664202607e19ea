"""The stdio relay: what Chrome runs on every `connectNative` (spec 1, 7).

The main thread only reads frames, validates them and admits them under the caps; every
request that gets a running place runs on its own thread (one waiting in the queue holds
none), so a slow Core call, a launch or a subscription setup never delays the reading of
another request (spec 7.1). The Core is reached only through the
gateway and the browser only through the outbox.

What a relay start imports before answering a ping is kept short on purpose (a test
pins the list): the policy, the subscriptions and the launch code load on first need,
from the start image's held modules, so an upgrade under a running host cannot mix two
versions' code (issue 30); a start without a usable image imports them all before it
serves.
"""

from __future__ import annotations

import _thread
import functools
import gc
import os
import sys

from native_host import __version__, codec, errors, logs, messages, startimage
from native_host.admission import Stopping, Ticket
from native_host.config import load_config
from native_host.errors import HostError
from native_host.framing import (
    FrameWriter,
    OversizeFrame,
    claim_stdout,
    read_frame,
    top_level_request_id,
)
from native_host.gateway import CoreGateway
from native_host.messages import NativeRequest
from native_host.outbox import Outbox

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import BinaryIO

    from native_host.admission import Attempt
    from native_host.config import HostConfig
    from native_host.policy import PolicyStore
    from native_host.subscriptions import Subscriptions

log = logs.get(__name__)

EXIT_OK = 0
EXIT_FRAMING_LOST = 1
EXIT_EXTENSION_REFUSED = 2


class Relay:
    """One host process's relay state: the gateway, the outbox, subscriptions, policy."""

    def __init__(self, config: HostConfig, env: Mapping[str, str], outbox: Outbox) -> None:
        self.config = config
        self.env = env
        self.outbox = outbox
        self.stopping = Stopping()
        self.gateway = CoreGateway(config, env, self.stopping)
        self._lazy_lock = _thread.allocate_lock()
        self._policy: PolicyStore | None = None
        self._subscriptions: Subscriptions | None = None

    # --- lazily built collaborators (a ping never needs them) ------------------
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

                self._subscriptions = Subscriptions(self.gateway, self.outbox)
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
        """Handle one frame; nothing a frame contains can end the reading loop.

        The catch-all is a safety net: no input found so far reaches it (tests prove
        the known ones do not), and its answer says "internal error" so a report names it.
        """
        try:
            self._handle_body(body)
        except Exception:
            log.exception("frame of %d bytes could not be handled", len(body))
            internal = HostError(
                errors.IPC_UNAVAILABLE, errors.MSG_INTERNAL, errors.STAGE_PARSE_MESSAGE
            )
            self.outbox.fail("", None, internal)

    def _handle_body(self, body: bytes) -> None:
        """Parse, validate and admit one frame in the reading thread (spec 1.4)."""
        try:
            message = codec.decode(body)
        except codec.InvalidJsonError as exc:
            error = HostError(
                errors.IPC_UNAVAILABLE,
                errors.MSG_NOT_JSON,
                errors.STAGE_PARSE_MESSAGE,
                error=str(exc),
            )
            request_id = messages.request_id_of(exc.document)
            if exc.document is None and isinstance(exc, codec.NestingTooDeepError):
                request_id = top_level_request_id(body)
            self.outbox.fail(request_id, None, error)
            return
        request_id = messages.request_id_of(message)
        kind: str | None = None
        try:
            request = messages.validate_envelope(message)
            kind = request.type
            log.info("request %s %s (%d bytes)", request.request_id, request.type, len(body))
            logs.trace_body(log, "request body", message)
            origin = self._check_origin(request)
            start: Callable[[Attempt], object]
            if kind == "subscribe_thread":
                messages.check_subscribe_fields(request.message)
                start = functools.partial(self._start_subscribe, request, origin)
            elif kind in messages.HOST_LOCAL_TYPES:
                start = functools.partial(self._spawn, self._answer_host_local, request, origin)
            else:
                start = functools.partial(self._spawn, self._relay_request, request, origin)
            stage = (
                errors.STAGE_SUBSCRIBE
                if kind == "subscribe_thread"
                else errors.STAGE_AWAIT_CORE_RESPONSE
            )
            self.gateway.admit(
                Ticket(
                    len(body),
                    origin,
                    self._timeout_ms(request),
                    stage,
                    start,
                    functools.partial(self.outbox.fail, request.request_id, kind),
                    local=kind in messages.HOST_LOCAL_TYPES,
                )
            )
        except HostError as error:
            self.outbox.fail(request_id, kind, error)

    def _timeout_ms(self, request: NativeRequest) -> int | None:
        """The request's response timeout, None for one the host waits on without a
        timeout (a folder picker, spec 9.5); a host-local request gets the default, as
        the longest it may wait for a place."""
        default_ms = self.config.core_response_timeout_ms
        if request.type in messages.HOST_LOCAL_TYPES or request.type == "subscribe_thread":
            return default_ms
        payload = messages.core_payload(request.type, request.message)
        return messages.response_timeout_ms(request.type, payload, default_ms)

    def _check_origin(self, request: NativeRequest) -> str | None:
        """Spec 1.4 step 4 / 7.11 (b, c): the normalised origin, or None when absent."""
        if not request.has_origin:
            return None
        from native_host.policy import host_local_request_error, validate_caller_origin

        value = request.message["callerOrigin"]
        if request.type in messages.HOST_LOCAL_TYPES:
            raise host_local_request_error(value)
        return validate_caller_origin(value, self.policy)

    def _start_subscribe(
        self, request: NativeRequest, origin: str | None, attempt: Attempt
    ) -> None:
        """Claim the subscription's key here, where admitted requests start one after
        the other in arrival order, so a duplicate never overtakes the subscribe it
        duplicates; the rest runs on the request's own thread."""
        try:
            sub, owner = self.subscriptions.claim(request, origin)
        except HostError as error:
            attempt.release()
            self.outbox.fail(request.request_id, request.type, error)
            return
        subscribe = functools.partial(self.subscriptions.subscribe, claimed=(sub, owner))
        refused = self._spawn(subscribe, request, origin, attempt)
        if refused is not None and owner:  # no setup will run: nobody may wait on the key
            self.subscriptions.abandon(sub, refused.to_error())

    def _spawn(
        self,
        target: Callable[[NativeRequest, str | None, Attempt], None],
        request: NativeRequest,
        origin: str | None,
        attempt: Attempt,
    ) -> HostError | None:
        """Run an admitted request on its own thread (called when it gets its place);
        the error it was answered with if the OS gave it no thread."""
        # `_thread`, not `threading`: a request thread needs no handle (`_guarded` answers
        # whatever happens to it, and exit abandons it), and `threading` costs a start
        # about 5% of a minimal relay's whole start (docs/performance.md).
        try:
            _thread.start_new_thread(self._guarded, (target, request, origin, attempt))
        except RuntimeError as exc:  # "can't start new thread": the OS said no
            attempt.release()
            refused = errors.resources_exhausted(errors.STAGE_ADMIT_REQUEST, str(exc))
            self.outbox.fail(request.request_id, request.type, refused)
            return refused
        return None

    def _guarded(
        self,
        target: Callable[[NativeRequest, str | None, Attempt], None],
        request: NativeRequest,
        origin: str | None,
        attempt: Attempt,
    ) -> None:
        """Run one request; any failure answers that request and never ends the process."""
        try:
            target(request, origin, attempt)
        except HostError as error:
            if not self.stopping.is_set():
                self.outbox.fail(request.request_id, request.type, error)
        except Exception:
            log.exception("request %s (%s) crashed", request.request_id, request.type)
            if not self.stopping.is_set():
                internal = HostError(
                    errors.IPC_UNAVAILABLE, errors.MSG_INTERNAL, errors.STAGE_RELAY_RESPONSE
                )
                self.outbox.fail(request.request_id, request.type, internal)
        finally:
            attempt.release()

    # --- requests ---------------------------------------------------------------
    def _answer_host_local(
        self, request: NativeRequest, origin: str | None, attempt: Attempt
    ) -> None:
        from native_host.policy import handle_host_local

        result = handle_host_local(request.message, self.policy)
        self.outbox.ok(request.request_id, request.type, result)

    def _relay_request(self, request: NativeRequest, origin: str | None, attempt: Attempt) -> None:
        envelope = messages.core_envelope(request, origin)
        timeout_ms = messages.response_timeout_ms(
            request.type, envelope["payload"], self.config.core_response_timeout_ms
        )
        response = self.gateway.request(attempt, envelope, timeout_ms)
        logs.trace_body(log, "core response", response)
        if self.stopping.is_set():
            return
        if response["ok"]:
            self.outbox.ok(request.request_id, request.type, response["result"])
        else:
            self.outbox.error(request.request_id, request.type, response["error"])

    # --- lifetime ---------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop everything at once: no joins, no more frames (spec 7.13)."""
        self.stopping.set()
        self.outbox.close()
        self.gateway.close_all()


def _refuse_extension(outbox: Outbox, extension_origin: str) -> int:
    from native_host.extension import extension_not_allowed_error

    error = extension_not_allowed_error(extension_origin)
    outbox.send(messages.error_response("", error.to_error()))
    return EXIT_EXTENSION_REFUSED


def run_relay(argv: Sequence[str], env: Mapping[str, str] = os.environ, image: str = "none") -> int:
    """Relay mode: claim stdout, check the calling extension, serve until EOF, exit.

    `image` is how the launcher's start image fared (`native_host.startimage`)."""
    frames_fd = claim_stdout()
    config = load_config(env)
    logs.setup(config.log_level, env)
    for problem in config.problems:
        log.warning("config: %s", problem)
    from native_host.extension import check_extension_origin, parse_extension_arg

    extension = parse_extension_arg(argv)
    log.info(
        "start pid=%d version=%s extension=%s image=%s",
        os.getpid(),
        __version__,
        extension,
        image,
    )
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
    if image != startimage.LOADED:  # no held modules: import them all now (issue 30)
        for failure in startimage.import_later():
            log.warning("cannot load %s", failure)
    gc.freeze()  # start-up's objects are permanent: later collections skip them
    gc.enable()
    sys.audit(startimage.SERVING_EVENT)
    status = relay.serve(sys.stdin.buffer)
    relay.shutdown()
    return _exit(status)


def _exit(status: int) -> int:
    """Exit now, abandoning in-flight threads (spec 7.13); on the way out, remove what an
    upgrade retired that no host uses any more (`native_host.versions`)."""
    log.info("exit status=%d", status)
    try:
        from native_host import versions

        for removed in versions.leave():
            log.info("removed %s: retired, and no host runs from it any more", removed)
    except Exception as exc:  # the exit goes on whatever happens to a leftover
        log.warning("retired versions not removed: %s", exc)
    logs.close()
    os._exit(status)
