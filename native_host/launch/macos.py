"""macOS: start Pedelec Desktop's `.app` through LaunchServices, not as the host's child.

A process the host starts inherits the host's "responsible process" (the Python or the
frozen host Chrome started), so the Desktop's and its agents' privacy (TCC) prompts and
grants would land on that, not on Pedelec.app. `/usr/bin/open -a <bundle>` asks
LaunchServices to launch the bundle as if it had been opened in the Finder, with its own
responsibility. Flags, from open(1): `-g` does not bring it to the foreground, `-j`
launches it hidden, `--args` passes the rest to its `main()`.

The trust checks stay on the bundle: `app-launch.json`'s `executablePath` must be
`<bundle>.app/Contents/MacOS/<name>` (checked with every directory on the way, as
everywhere), and LaunchServices starts what the bundle's `Contents/Info.plist` names
(`CFBundleExecutable`), so that file must be the user's or root's, writable by nobody
else, and name that same executable. LaunchServices opens the bundle by path: as for a
script, the checked directories are what keep others from swapping it.

Never run on macOS by this project's tests; the pure parts are tested with recorded data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from native_host.launch import trust

OPEN = "/usr/bin/open"
OPEN_FLAGS = ("-g", "-j")
"""Background (no activation) and hidden: the Desktop's own background start."""
BUNDLE_SUFFIX = ".app"
INFO_PLIST = os.path.join("Contents", "Info.plist")
MAX_INFO_PLIST_BYTES = 1 << 20


def app_bundle(executable: str) -> str | None:
    """The `.app` whose main executable `executable` is (`X.app/Contents/MacOS/name`),
    or None for a program outside a bundle (which is then started directly)."""
    macos_dir = os.path.dirname(executable)
    contents = os.path.dirname(macos_dir)
    bundle = os.path.dirname(contents)
    if (
        os.path.basename(macos_dir) == "MacOS"
        and os.path.basename(contents) == "Contents"
        and bundle.endswith(BUNDLE_SUFFIX)
        and len(os.path.basename(bundle)) > len(BUNDLE_SUFFIX)
    ):
        return bundle
    return None


def open_argv(bundle: str, args: Sequence[str]) -> list[str]:
    """`open -g -j -a <bundle> --args <args...>`."""
    return [OPEN, *OPEN_FLAGS, "-a", bundle, "--args", *args]


def check_bundle(bundle: str, executable: str) -> None:
    """Refuse a bundle whose Info.plist another user could change or that names another
    executable than the checked one (`UntrustedProgramError`, violation executablePath)."""
    import plistlib
    from xml.parsers.expat import ExpatError

    path = os.path.join(bundle, INFO_PLIST)
    # The same checks as on a program: every directory on the way, then the file itself
    # through its descriptor (the user's or root's, writable by nobody else).
    checked = trust.open_trusted(path, {})
    try:
        with os.fdopen(os.dup(checked.fd), "rb") as handle:
            handle.seek(0)  # the checks may have read its first bytes
            raw = handle.read(MAX_INFO_PLIST_BYTES + 1)
    finally:
        checked.close()
    if len(raw) > MAX_INFO_PLIST_BYTES:
        raise trust.UntrustedProgramError("executablePath", path, "is too large")
    try:
        document = plistlib.loads(raw)
    except (ValueError, TypeError, OverflowError, ExpatError) as exc:
        raise trust.UntrustedProgramError(
            "executablePath", path, f"is not a plist: {exc}"
        ) from None
    named = document.get("CFBundleExecutable") if isinstance(document, dict) else None
    if named != os.path.basename(executable):
        raise trust.UntrustedProgramError(
            "executablePath",
            executable,
            f"is not the executable its bundle's Info.plist names ({named!r})",
        )
