"""The 8.3 short name of a Windows path, the ASCII name a batch file can use when the long
one is not ASCII (cmd.exe reads batch files in the OEM code page)."""

from __future__ import annotations

import sys

MAX_PATH_CHARS = 32_768


def short_path(path: str) -> str | None:
    """`GetShortPathNameW(path)`; None off Windows, for a missing file, or where the volume
    keeps no 8.3 names (the long name comes back)."""
    if sys.platform == "win32":  # pragma: no cover - Windows only (run on the Wine lane)
        import ctypes

        buffer = ctypes.create_unicode_buffer(MAX_PATH_CHARS)
        length = ctypes.windll.kernel32.GetShortPathNameW(path, buffer, MAX_PATH_CHARS)
        if 0 < length < MAX_PATH_CHARS and buffer.value != path:
            return buffer.value
    return None
