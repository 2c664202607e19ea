"""The calling extension (spec 7.11 a): the browser names it in argv; only the official
extension and the ones `install --extension-id` allowed are served.

Plain string checks, no regular expression: every host start runs them.
"""

from __future__ import annotations

from native_host import OFFICIAL_EXTENSION_ID
from native_host.errors import (
    MSG_EXTENSION_NOT_ALLOWED,
    ORIGIN_NOT_APPROVED,
    STAGE_VALIDATE_ORIGIN,
    HostError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

EXTENSION_PREFIX = "chrome-extension://"
_ID_LETTERS = frozenset("abcdefghijklmnop")
_ID_LENGTH = 32


def parse_extension_arg(argv: Sequence[str]) -> str | None:
    """The first argument naming an extension origin; None when a proxy passed none."""
    return next((arg for arg in argv if arg.startswith(EXTENSION_PREFIX)), None)


def check_extension_origin(arg: str, allowed_ids: Iterable[str]) -> bool:
    """Whether `arg` is `chrome-extension://<id>/` (the slash optional) with the official
    id or a configured one; an id is 32 letters a-p."""
    if not arg.startswith(EXTENSION_PREFIX):
        return False
    extension_id = arg[len(EXTENSION_PREFIX) :]
    if extension_id.endswith("/"):
        extension_id = extension_id[:-1]
    if len(extension_id) != _ID_LENGTH or not set(extension_id) <= _ID_LETTERS:
        return False
    return extension_id == OFFICIAL_EXTENSION_ID or extension_id in set(allowed_ids)


def extension_not_allowed_error(arg: str) -> HostError:
    """The one frame a refused extension gets before the host exits with status 2."""
    return HostError(
        ORIGIN_NOT_APPROVED,
        MSG_EXTENSION_NOT_ALLOWED,
        STAGE_VALIDATE_ORIGIN,
        reason="extension_not_allowed",
        extensionOrigin=arg,
    )
