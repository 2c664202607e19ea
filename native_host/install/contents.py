"""What install writes: the manifest document, the launcher script, and reading a
launcher back (doctor uses that to explain a host that cannot start)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence

from native_host import HOST_NAME
from native_host.install import locations
from native_host.install.locations import Os

MANIFEST_DESCRIPTION = "Pedelec native messaging host"
LAUNCHER_NAMES = {Os.LINUX: "pedelec-native-host", Os.DARWIN: "pedelec-native-host"}
WINDOWS_LAUNCHER = "pedelec-native-host.bat"
LAUNCHER_MARK = "# Written by `pedelec-native-host install`; Chrome runs this as the host."
INTERPRETER_OPTIONS = ("-I",)
"""Isolated mode: no PYTHONPATH, no user site, no current directory on sys.path, so the
environment a browser passes cannot change which code runs (docs/install.md, "The
launcher")."""
ENTRY = "import sys; from native_host.cli import main; sys.exit(main())"
"""What the launcher runs."""
IMAGE_ENTRY = "import sys; from native_host.cli import start; sys.exit(start({image}))"
"""What the launcher of a lasting install runs: the relay's modules from the start image
written beside it (`native_host.startimage`); `{image}` is a Python string of its path."""
SHEBANG_MAX_BYTES = 127
"""The longest `#!` line every kernel reads whole (Linux before 5.1 read 128 bytes with
the newline; macOS reads 512): a longer one falls back to `/bin/sh`."""


def interpreter_options(import_paths: Sequence[str]) -> list[str]:
    """The launcher's interpreter options: `-S` when it names its import paths itself."""
    return [*INTERPRETER_OPTIONS, *(["-S"] if import_paths else [])]


def launcher_name(os_name: Os) -> str:
    """The launcher's file name on this OS (a batch file on Windows)."""
    return WINDOWS_LAUNCHER if os_name is Os.WIN32 else LAUNCHER_NAMES[os_name]


def render_manifest(host_path: str, extra_ids: Sequence[str]) -> bytes:
    """The manifest (spec 1.3): official origin first, then each extra id."""
    manifest = {
        "name": HOST_NAME,
        "description": MANIFEST_DESCRIPTION,
        "path": host_path,
        "type": "stdio",
        "allowed_origins": locations.allowed_origins(extra_ids),
    }
    return (json.dumps(manifest, indent=2) + "\n").encode()


def launcher_text(
    os_name: Os,
    python: str,
    import_paths: Sequence[str] = (),
    launcher_dir: str | None = None,
    short_path: Callable[[str], str | None] | None = None,
    image: str | None = None,
) -> bytes:
    """A script Chrome can execute that runs this package with this interpreter (from
    the start image at `image`, when there is one).

    Chrome starts the host for every burst of page activity, so the launcher skips what a
    start does not need: `-c` or a script rather than `-m` (runpy and its imports, about
    2 ms), and, when `import_paths` says where the package and its dependencies live (a
    lasting install in site directories), `-S` with those paths instead of `site` (about
    1 ms), after the standard library's, as `site` would put them (every stdlib import
    would otherwise look in them first). On Linux and macOS the launcher is a Python
    script whose `#!` line names the interpreter (the kernel starts it directly: no
    shell, about 0.7 ms), unless that line cannot carry the path (white space, length):
    then `/bin/sh` execs it.

    On Windows the batch file is ASCII (cmd.exe reads it in the OEM code page, so
    `C:\\Users\\José` would reach it as `Jos├®`) and its code string holds no `"` (a
    path holding `'` would make `repr` use one and end the `-c` argument): see
    `windows_launcher`.
    """
    options = " ".join(interpreter_options(import_paths))
    if os_name is Os.WIN32:
        return windows_launcher(python, options, import_paths, launcher_dir, short_path, image)
    entry = ENTRY if image is None else IMAGE_ENTRY.format(image=repr(image))
    if import_paths:
        rest = entry.removeprefix("import sys; ")
        entry = f"import sys; sys.path += {list(import_paths)!r}; {rest}"
    # Linux passes everything after the path as one argument: the options as one word.
    shebang = f"#!{python} -{''.join(option.lstrip('-') for option in options.split())}"
    if len(shebang.encode()) <= SHEBANG_MAX_BYTES and not any(c.isspace() for c in python):
        return f"{shebang}\n{LAUNCHER_MARK}\n{entry}\n".encode()
    quoted = shlex.quote(python)
    return (
        f'#!/bin/sh\n{LAUNCHER_MARK}\nexec {quoted} {options} -c {shlex.quote(entry)} "$@"\n'
    ).encode()


def _batch_safe(text: str) -> bool:
    """Whether cmd.exe reads `text` in a quoted batch-file word as written: printable
    ASCII (the same in every OEM code page) without `"` (`%` is doubled on writing)."""
    return all(" " <= char <= "~" for char in text) and '"' not in text


def _python_string(text: str) -> str:
    """A Python expression for `text` made of batch-safe characters without `"`."""
    if _batch_safe(text) and "'" not in text:
        return repr(text)
    return f"bytes.fromhex('{text.encode().hex()}').decode()"


def batch_interpreter(
    python: str, launcher_dir: str | None, short_path: Callable[[str], str | None] | None
) -> str:
    """How the batch file names the interpreter in ASCII: as it is; else relative to the
    batch file's own folder (`%~dp0`, the usual case of a venv under the same profile);
    else its 8.3 short name. ValueError when none of them is ASCII."""
    import ntpath

    if _batch_safe(python):
        return python
    if launcher_dir is not None:
        try:
            relative = ntpath.relpath(python, launcher_dir)
        except ValueError:  # another drive
            relative = ""
        if relative and _batch_safe(relative):
            return "%~dp0" + relative
    short = short_path(python) if short_path is not None else None
    if short and _batch_safe(short):
        return short
    raise ValueError(
        f"{python} cannot be named in a batch file (cmd.exe reads it in the OEM code page): "
        "install into a folder whose path is ASCII, or use the frozen build"
    )


def windows_launcher(
    python: str,
    options: str,
    import_paths: Sequence[str],
    launcher_dir: str | None,
    short_path: Callable[[str], str | None] | None,
    image: str | None = None,
) -> bytes:
    """The ASCII batch file: `%` doubled everywhere, paths in the code as Python strings
    without `"` (hex when a path is not plain ASCII)."""
    entry = ENTRY if image is None else IMAGE_ENTRY.format(image=_python_string(image))
    if import_paths:
        rest = entry.removeprefix("import sys; ")
        listed = ", ".join(_python_string(path) for path in import_paths)
        entry = f"import sys; sys.path += [{listed}]; {rest}"
    spelled = batch_interpreter(python, launcher_dir, short_path)
    relative = spelled.startswith("%~dp0")
    head = ("%~dp0" if relative else "") + spelled.removeprefix("%~dp0").replace("%", "%%")
    code = entry.replace("%", "%%")
    return f'@"{head}" {options} -c "{code}" %*\r\n'.encode("ascii")


def launcher_interpreter(text: str, launcher_dir: str | None = None) -> str | None:
    """The interpreter a launcher written by `launcher_text` runs, or None if the text is
    not such a launcher (doctor uses this to explain a host that cannot start);
    `launcher_dir` resolves a batch file's `%~dp0`."""
    if text.startswith("#!") and not text.startswith("#!/bin/sh\n") and LAUNCHER_MARK in text:
        words = text[2:].split("\n", 1)[0].split()
        return words[0] if words else None
    for line in text.splitlines():
        if line.startswith('@"'):
            spelled = line[2:].split('"', 1)[0]
            if spelled.startswith("%~dp0"):
                import ntpath

                relative = spelled.removeprefix("%~dp0").replace("%%", "%")
                return ntpath.normpath(ntpath.join(launcher_dir or "", relative))
            return spelled.replace("%%", "%")
        if line.startswith("exec ") and LAUNCHER_MARK in text:
            try:
                words = shlex.split(line)
            except ValueError:
                return None
            return words[1] if len(words) > 1 else None
    return None
