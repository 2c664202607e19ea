"""The host's log: a rotating file in the user log dir, never stdout (spec 7.15).

At the default level only metadata is logged (ids, types, sizes, codes, timings);
bodies appear only at `trace`, with ticket secrets redacted at every level.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from native_host import paths

TRACE = 5
LOG_FILE = "pedelec-native-host.log"
MAX_BYTES = 1_048_576
BACKUPS = 3
SECRET_FIELDS = frozenset({"token", "uploadUrl", "downloadUrl"})
_LEVELS = {"info": logging.INFO, "debug": logging.DEBUG, "trace": TRACE}
_TRACE_BODY_CHARS = 2000


class _TolerantRotatingHandler(logging.handlers.RotatingFileHandler):
    """Several hosts share one file: a lost rotation race must never break relaying."""

    def doRollover(self) -> None:
        try:
            super().doRollover()
        except OSError:
            if self.stream is None:
                self.stream = self._open()

    def handleError(self, record: logging.LogRecord) -> None:
        """Logging failures are swallowed: they must never affect relaying."""


def setup_logging(level_name: str, env: Mapping[str, str] = os.environ) -> Path | None:
    """Log to the rotating file; returns its path, or None if the dir is unusable."""
    logging.addLevelName(TRACE, "TRACE")
    logging.raiseExceptions = False
    root = logging.getLogger()
    root.setLevel(_LEVELS.get(level_name, logging.INFO))
    try:
        directory = paths.log_dir(env)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / LOG_FILE
        handler: logging.Handler = _TolerantRotatingHandler(
            path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True
        )
    except OSError:
        return None
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_thread_exception
    return path


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    logging.getLogger("native_host").critical("uncaught exception", exc_info=(kind, value, tb))


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is not None:
        logging.getLogger("native_host").error(
            "uncaught exception in thread %s",
            args.thread.name if args.thread else "?",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )


def redact(value: Any) -> Any:
    """A copy of a JSON value with ticket secrets replaced, for trace logging."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if k in SECRET_FIELDS else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def trace_body(logger: logging.Logger, label: str, body: Any) -> None:
    """Log a message body at trace level only: redacted and truncated."""
    if logger.isEnabledFor(TRACE):
        import json

        text = json.dumps(redact(body), ensure_ascii=False)[:_TRACE_BODY_CHARS]
        logger.log(TRACE, "%s %s", label, text)
