"""The host under test: this checkout's host, or the build `PEDELEC_TEST_HOST_CMD` names.

`PEDELEC_TEST_HOST_CMD` (a path or a shell-quoted command) makes every black-box test run
another build of the host, e.g. the PyInstaller bundle or an installed wheel.
"""

from __future__ import annotations

import os
import queue
import shlex

from native_host.hostproc import HostProcess, default_host_command

HOST_CMD_ENV = "PEDELEC_TEST_HOST_CMD"


def host_command() -> list[str]:
    """The command that starts the host under test (without the origin argument). A
    `PEDELEC_TEST_HOST_CMD` that names a file is that file alone: an installed artifact's
    path may hold spaces (macOS's `Application Support`) or backslashes (Windows), which
    shell-style splitting would cut or eat."""
    override = os.environ.get(HOST_CMD_ENV)
    if not override:
        return default_host_command()
    return [override] if os.path.isfile(override) else shlex.split(override)


class HostUnderTest(HostProcess):
    """A host process plus what only tests ask of it: proof that nothing was written."""

    def no_frame_within(self, seconds: float) -> bool:
        """True if the host writes no frame for `seconds` (stdout closing counts as none);
        a frame that does arrive is kept for the next read."""
        try:
            message = self._next(seconds)
        except queue.Empty:
            return True
        self._peeked.insert(0, message)
        return message is None
