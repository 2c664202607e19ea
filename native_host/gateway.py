"""The one place the host talks to the Core (docs/architecture.md).

The gateway finds the Core through `runtime.json`, checks who is listening before a
byte is written, starts Pedelec Desktop once when the Core is down, writes request
lines and reads responses or keeps a stream open. The relay, the subscriptions, the
launcher's readiness probe and `doctor` all come through here, so each rule holds
everywhere at once:

- retry only before the first byte (spec 7.5): `_open` is the only code that may launch
  and re-attempt, and it runs before anything is sent; an `Attempt` that was written
  once is never written again, whoever asks;
- admission (native_host/admission.py, docs/security.md): every request takes a running
  place here or waits in the bounded, fair queue; only a full queue is answered at once;
- the size rule of Core requests (spec 7.6) and the response timeout (spec 7.3), which
  counts from the request's admission, so time spent queued counts too.
"""

from __future__ import annotations

import _thread
import os
import time

from native_host import codec, errors, logs
from native_host.admission import Admission, Attempt, Stopping, Ticket
from native_host.core import peer
from native_host.core.connection import (
    ConnectionRegistry,
    CoreConnection,
    connect_socket,
    is_resource_error,
)
from native_host.core.discovery import CoreEndpoint, CoreUnreachableError, read_runtime
from native_host.core.lines import MAX_LINE_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from native_host.config import HostConfig
    from native_host.launch.launcher import Launcher

log = logs.get(__name__)

_MIN_PROBE_S = 0.05
"""Floor of a probe's budget so the last probe before a deadline can still succeed."""
MSG_ALREADY_SENT = "the request already reached the Core once and is never sent again"


class _ClosedBeforeFirstByteError(Exception):
    """The Core's end of a new connection closed before the host wrote to it."""


def _stages(stage: str | None) -> tuple[str, str]:
    """(write stage, read stage): a subscribe or a probe reports both at its own stage."""
    if stage is None:
        return errors.STAGE_SEND_REQUEST, errors.STAGE_AWAIT_CORE_RESPONSE
    return stage, stage


class CoreGateway:
    """Core access for one host process (or one `doctor` run)."""

    def __init__(
        self,
        config: HostConfig,
        env: Mapping[str, str],
        stopping: Stopping | None = None,
    ) -> None:
        self.config = config
        self.env = env
        self.stopping = stopping or Stopping()
        self.registry = ConnectionRegistry()
        self.admission = Admission(
            config.max_in_flight_requests,
            config.max_untimed_requests,
            config.max_in_flight_bytes,
            config.max_queued_requests,
            config.max_queued_bytes,
            self.stopping,
        )
        self._launcher: Launcher | None = None
        self._launcher_lock = _thread.allocate_lock()

    @property
    def launcher(self) -> Launcher:
        """Built on first need: a host whose Core is up never loads the launch code."""
        with self._launcher_lock:
            if self._launcher is None:
                from native_host.launch.launcher import Launcher

                self._launcher = Launcher(self.config, self.env, self.probe, self.stopping.is_set)
            return self._launcher

    # --- what callers use ------------------------------------------------------------
    def admit(self, ticket: Ticket) -> None:
        self.admission.admit(ticket)

    @staticmethod
    def encode_request(envelope: dict[str, Any], stage: str = errors.STAGE_SEND_REQUEST) -> bytes:
        """A Core request line (no newline), refused over 1 MiB before any discovery
        (spec 7.6): no connection is opened and no launch happens."""
        line = codec.encode(envelope)
        if len(line) > MAX_LINE_BYTES:
            raise errors.HostError(
                errors.MESSAGE_TOO_LARGE, errors.MSG_REQUEST_TOO_LARGE, stage, sizeBytes=len(line)
            )
        return line

    @staticmethod
    def refuse_resend(attempt: Attempt, stage: str | None) -> None:
        """The rule of spec 7.5 in one place: a request written once is never written
        again, whatever happened since (a broken stream, a restarted Core)."""
        if attempt.written:
            raise errors.HostError(
                errors.CORE_RUNTIME_UNAVAILABLE,
                errors.MSG_APP_NOT_RUNNING,
                _stages(stage)[0],
                error=MSG_ALREADY_SENT,
            )

    def request(
        self,
        attempt: Attempt,
        envelope: dict[str, Any],
        timeout_ms: int | None,
        stage: str | None = None,
    ) -> dict[str, Any]:
        """One request on its own connection; the validated response (spec 3.3, 7.2)."""
        line = self.encode_request(envelope, _stages(stage)[0])
        connection = self._open(attempt, stage)
        try:
            started = time.monotonic()
            response = self._exchange(connection, attempt, line, timeout_ms, stage)
        finally:
            connection.close()
        log.info(
            "core answered %s %s ok=%s in %.0f ms",
            envelope["requestId"],
            envelope["type"],
            response["ok"],
            (time.monotonic() - started) * 1000,
        )
        if response["requestId"] != envelope["requestId"]:
            log.debug("core answered %s as %r", envelope["requestId"], response["requestId"])
        return response

    def open_stream(
        self,
        attempt: Attempt,
        envelope: dict[str, Any],
        timeout_ms: int,
        on_other_line: Callable[[Any], bool],
    ) -> tuple[CoreConnection, dict[str, Any]]:
        """Write a subscribe and read its response, keeping the connection for the
        stream's events. Lines before the response go to `on_other_line` (spec 7.10).
        The caller owns the connection from here (and closes it)."""
        line = self.encode_request(envelope)
        connection = self._open(attempt, errors.STAGE_SUBSCRIBE)
        try:
            response = self._exchange(
                connection, attempt, line, timeout_ms, errors.STAGE_SUBSCRIBE, on_other_line
            )
        except BaseException:
            connection.close()
            raise
        return connection, response

    def ping(self, timeout_s: float) -> tuple[CoreEndpoint, dict[str, Any]]:
        """Ping the Core now without launching anything: its endpoint and ping result.

        What readiness probes and `doctor` use, so both see what requests see.
        Raises CoreUnreachableError (down or refused) or HostError (it answered badly).
        """
        deadline = time.monotonic() + timeout_s
        endpoint = self._discover()
        connection = self._connect(endpoint, timeout_s)
        ping = {"requestId": f"host_ping_{os.urandom(6).hex()}", "type": "ping", "payload": {}}
        budget_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            response = self._exchange(
                connection,
                Attempt(),
                codec.encode(ping),
                budget_ms,
                errors.STAGE_WAIT_FOR_CORE_RUNTIME,
            )
        finally:
            connection.close()
        if not response["ok"]:
            raise errors.HostError(
                errors.CORE_RUNTIME_UNAVAILABLE,
                errors.MSG_APP_NOT_RUNNING,
                errors.STAGE_WAIT_FOR_CORE_RUNTIME,
                error=f"ping answered {response['error'].get('code')}",
            )
        result = response["result"]
        process_id = result.get("processId") if isinstance(result, dict) else None
        if isinstance(process_id, int) and process_id != endpoint.pid:
            raise CoreUnreachableError(
                errors.STAGE_VERIFY_CORE,
                reason="the Core's ping names another process than runtime.json",
                violation="pid_mismatch",
                endpoint=endpoint.endpoint,
            )
        return endpoint, result

    def probe(self, deadline: float) -> bool:
        """Readiness (spec 7.14 step 7): a valid, fresh, verified Core answers a ping
        ok:true, each phase bounded by the connect timeout and the time left."""
        if self.stopping.is_set():
            return False
        budget = min(self.config.connect_timeout_ms / 1000, deadline - time.monotonic())
        try:
            self.ping(max(budget, _MIN_PROBE_S))
        except (CoreUnreachableError, errors.HostError):
            return False
        return True

    def close_all(self) -> None:
        """Shutdown: close every connection, requests and streams alike (spec 7.13)."""
        self.registry.close_all()

    # --- before the first byte ---------------------------------------------------------
    def _discover(self) -> CoreEndpoint:
        from native_host import paths

        try:
            home = paths.pedelec_home(self.env)
        except (RuntimeError, KeyError, OSError):
            raise errors.HostError(
                errors.IPC_UNAVAILABLE, errors.MSG_HOME_UNRESOLVABLE, errors.STAGE_DISCOVER_CORE
            ) from None
        return read_runtime(home, check_pid=self.config.check_runtime_pid)

    def _connect(self, endpoint: CoreEndpoint, timeout_s: float | None = None) -> CoreConnection:
        """Connect and check who answers (before any byte is written).

        A connection the Core closed before the check is opened once more (nothing was
        sent, spec 7.5): a listener that accepted is a Core shutting down or overloaded,
        not a down Core, so closing twice is answered at once and never starts a launch.
        A Core that died meanwhile refuses the second connect, which does count as down.
        """
        try:
            return self._connect_once(endpoint, timeout_s)
        except _ClosedBeforeFirstByteError as first:
            log.info("the Core on %s closed a connection unused (%s)", endpoint.endpoint, first)
        try:
            return self._connect_once(endpoint, timeout_s)
        except _ClosedBeforeFirstByteError as again:
            raise errors.HostError(
                errors.IPC_UNAVAILABLE,
                errors.MSG_CORE_CLOSED_UNUSED,
                errors.STAGE_CONNECT_CORE,
                endpoint=endpoint.endpoint,
                error=str(again),
            ) from None

    def _connect_once(self, endpoint: CoreEndpoint, timeout_s: float | None) -> CoreConnection:
        limit = self.config.connect_timeout_ms / 1000
        timeout = limit if timeout_s is None else max(0.001, min(limit, timeout_s))
        try:
            sock = connect_socket(endpoint, timeout)
        except OSError as exc:
            if is_resource_error(exc):
                raise errors.resources_exhausted(errors.STAGE_CONNECT_CORE, str(exc)) from None
            raise CoreUnreachableError(
                errors.STAGE_CONNECT_CORE, endpoint=endpoint.endpoint, error=str(exc) or repr(exc)
            ) from None
        try:
            self.registry.add(sock)
        except OSError as exc:
            raise CoreUnreachableError(
                errors.STAGE_CONNECT_CORE, endpoint=endpoint.endpoint, error=str(exc)
            ) from None
        connection = CoreConnection(sock, endpoint, self.registry)
        try:
            self._verify_peer(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _verify_peer(self, connection: CoreConnection) -> None:
        """Refuse a listener that is not the user's Core (docs/security.md): another user
        who binds a stale Core port must receive zero bytes. A refused Core counts as
        down for the launch logic (the Desktop then starts a genuine one on a new port)."""
        endpoint = connection.endpoint
        try:
            verdict = peer.verify_core_peer(
                connection.sock, endpoint.pid, self.config.check_runtime_pid
            )
        except peer.PeerRefusedError as exc:
            if exc.reason == peer.RESOURCES:
                raise errors.resources_exhausted(errors.STAGE_VERIFY_CORE, exc.detail) from None
            if exc.reason == peer.CONNECTION_GONE:
                raise _ClosedBeforeFirstByteError(exc.explanation) from None
            log.warning("refused the listener on %s: %s", endpoint.endpoint, exc.reason)
            raise CoreUnreachableError(
                errors.STAGE_VERIFY_CORE,
                reason=exc.explanation,
                violation=exc.reason,
                endpoint=endpoint.endpoint,
            ) from None
        log.debug("core on %s verified (%s)", endpoint.endpoint, verdict)

    def _open(self, attempt: Attempt, stage: str | None) -> CoreConnection:
        """A verified connection, launching the Desktop once if the Core is down and
        re-attempting once (spec 7.5, 7.14). Nothing has been sent yet."""
        self.refuse_resend(attempt, stage)
        try:
            return self._connect(self._discover())
        except CoreUnreachableError as first:
            why = first.details.get("violation") or first.details.get("reason") or "refused"
            log.info("Core unreachable (%s: %s); launching the desktop app", first.stage, why)
        self.launcher.ensure_running()
        try:
            return self._connect(self._discover())
        except CoreUnreachableError as again:
            raise again.to_host_error() from None

    # --- from the first byte on ----------------------------------------------------------
    def _exchange(
        self,
        connection: CoreConnection,
        attempt: Attempt,
        line: bytes,
        timeout_ms: int | None,
        stage: str | None,
        on_other_line: Callable[[Any], bool] | None = None,
    ) -> dict[str, Any]:
        stages = _stages(stage)
        deadline = None if timeout_ms is None else attempt.admitted + timeout_ms / 1000
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.response_timed_out(stages[1], timeout_ms)  # never written late
        attempt.written = True
        connection.send(line, deadline, timeout_ms, stages)
        return connection.read_response(deadline, timeout_ms, stages[1], on_other_line)
