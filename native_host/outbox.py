"""Everything the host sends to the browser passes here, under the 1 MiB cap (spec 7.7).

The relay and the subscriptions both write through one `Outbox`, which writes through
the one `FrameWriter`: no frame is ever over 1 MiB, and nothing else touches stdout.
"""

from __future__ import annotations

from native_host import codec, logs, messages
from native_host.framing import MAX_FRAME_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from native_host.errors import HostError
    from native_host.framing import FrameWriter

log = logs.get(__name__)


class Outbox:
    """The capped way out: responses, host-made messages and pre-encoded event frames."""

    def __init__(self, writer: FrameWriter) -> None:
        self.writer = writer

    def respond(self, request_id: str, kind: str | None, response: dict[str, Any]) -> bool:
        """Write a response; one that would exceed 1 MiB becomes an error (spec 7.7, 9.4).

        If even that error cannot fit (a requestId of nearly 1 MiB), it goes out with
        requestId "": the extension could not have matched it anyway.
        """
        body = codec.encode(response)
        if len(body) > MAX_FRAME_BYTES:
            log.warning("response %.64s (%s) of %d bytes replaced", request_id, kind, len(body))
            error = messages.oversize_response_error(kind or "", len(body)).to_error()
            body = codec.encode(messages.error_response(request_id, error))
            if len(body) > MAX_FRAME_BYTES:
                body = codec.encode(messages.error_response("", error))
        return self.writer.write_body(body)

    def ok(self, request_id: str, kind: str, result: Any) -> bool:
        return self.respond(request_id, kind, messages.ok_response(request_id, result))

    def error(self, request_id: str, kind: str | None, error: dict[str, Any]) -> bool:
        """Answer with an error object as it is (the Core's, or a host error's wire form)."""
        return self.respond(request_id, kind, messages.error_response(request_id, error))

    def fail(self, request_id: str, kind: str | None, error: HostError) -> bool:
        log.info(
            "request %s (%s) failed: %s at %s", request_id or '""', kind, error.code, error.stage
        )
        return self.error(request_id, kind, error.to_error())

    def send_body(self, body: bytes) -> bool:
        """Write a frame already encoded and measured by the caller (an event)."""
        return self.writer.write_body(body)

    def send_bodies(self, bodies: list[bytes]) -> bool:
        """Write frames already encoded and measured by the caller, in one go."""
        return self.writer.write_bodies(bodies)

    def send(self, message: dict[str, Any]) -> bool:
        """Write a host-made message; one that cannot fit (e.g. a thread id of nearly
        1 MiB echoed back) is dropped and logged rather than sent."""
        body = codec.encode(message)
        if len(body) > MAX_FRAME_BYTES:
            log.warning("dropped a %s message of %d bytes", message.get("type"), len(body))
            return False
        return self.writer.write_body(body)

    def close(self) -> None:
        """Write nothing more (shutdown, spec 7.13)."""
        self.writer.close()
