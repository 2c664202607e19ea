"""The modules a ping imports, in one file read in one go: the launcher's start (issue 19).

Chrome starts a host for every `connectNative`, and the first answer waits for some forty
Python modules: the relay's own and the standard library's it uses (json, re, enum, ...).
Through importlib each one costs a search of its directory, a stat of its source, an open
and read of its `.pyc` and the import system's Python bookkeeping; together, more than
the host's own work before its answer. So `install` writes, next to the launcher, an
image (docs/install.md, "The start image"): every module written in Python that a relay
start imports, compiled by the launcher's interpreter, each with the size and
modification time of its source, in the order a start finishes importing them. The
launcher runs `cli.start`, which reads the image under the rule every file the host
reads obeys (`files.read_trusted`), checks that every source is the one compiled, and
executes each module into a new module object, as the import system would.

Anything amiss (a source changed by an upgrade of the package or of Python that
`install` did not follow, another interpreter, a refused or damaged file) leaves the
image unused: the modules then load the usual way, the relay's first log line says why,
and `doctor` says what to do.

A bundle that carries its own interpreter (the Windows MSI, packaging/windows) ships a
*sealed* image instead, written when the bundle is built: its modules' paths are relative
to the bundle, it holds the standard library's modules too (the embeddable CPython keeps
them compiled in a zip), and it is not proven against the sources at each start. It is
part of the bundle as the bundle's `.pyc` files and DLLs are: built from the same files,
installed and removed with them by one package, in a folder only the user can write (the
reader still refuses it otherwise). Under Wine a stat costs about 1.5 ms, and proving an
image of 120 modules would cost more than the image saves.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import CodeType
    from typing import Any

    Entry = tuple[str, str, bool, int, int, CodeType]
    """name, source path, is a package, the source's st_mtime_ns and st_size, its code.
    In a sealed image the path is relative to the image's folder (`/`-separated) and the
    two numbers are 0: nothing is proven against the source."""

IMAGE_NAME = "pedelec-native-host.image"
"""The image's file name, next to the launcher."""
MAX_IMAGE_BYTES = 16 * 1_048_576
FORMAT = "pedelec-start-image 1"
SEALED_FORMAT = "pedelec-start-image 1 sealed"
"""The format line of a bundle's image (its paths relative to the image's folder)."""
ROOTS = ("native_host.relay", "native_host.extension")
"""What a relay start imports after `cli`, this module and `files` (which read the image):
the image holds these and everything they import that is written in Python."""
BUILD_TIMEOUT_S = 60.0

# How a start fared with its image: the words of the relay's first log line and doctor's.
LOADED = "loaded"
NONE = "none"
"""The host was not started through an image (a console script, an older launcher)."""
MISSING = "missing"
REFUSED = "refused"
FOREIGN = "other-python"
DAMAGED = "damaged"
STALE = "stale"


class ImageUnusable(Exception):
    """The image cannot be used; `state` is one of the words above, `detail` says why."""

    def __init__(self, state: str, detail: str) -> None:
        super().__init__(f"{state}: {detail}")
        self.state = state
        self.detail = detail


def _header(sealed: bool = False) -> bytes:
    """The interpreter's bytecode magic (what a `.pyc` starts with), then the format."""
    magic: bytes = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
    return magic + (SEALED_FORMAT if sealed else FORMAT).encode() + b"\n"


# -- writing (install) -----------------------------------------------------------------
def build(
    python: str | Sequence[str],
    options: Sequence[str],
    import_paths: Sequence[str],
    sealed_root: str | None = None,
) -> bytes:
    """The image for a launcher that runs `python` (a path, or a command such as
    `wine python.exe`) with these options and import paths: recorded and compiled by that
    very interpreter, so it holds what that launcher imports. `sealed_root`: a sealed
    image of the bundle in that folder (as the interpreter names it). OSError when it
    cannot be built."""
    import subprocess

    command = [python] if isinstance(python, str) else list(python)
    code = (
        f"import sys; sys.path += {list(import_paths)!r}; "
        f"from native_host import startimage; startimage.write_recorded({sealed_root!r})"
    )
    try:
        done = subprocess.run(
            [*command, *options, "-c", code],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=BUILD_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise OSError(f"{' '.join(command)} could not be run: {exc}") from None
    wanted = (SEALED_FORMAT if sealed_root is not None else FORMAT).encode() + b"\n"
    if done.returncode != 0 or wanted not in done.stdout[:64]:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise OSError(f"{' '.join(command)} exited with status {done.returncode}: {' '.join(last)}")
    return done.stdout


def write_recorded(sealed_root: str | None = None) -> None:
    """Import `ROOTS` as a relay start does and write their image to stdout: what
    `build` runs in the launcher's interpreter. A linked image holds the modules read
    from `.py` sources, each with its source's size and mtime; a sealed one (the bundle
    in `sealed_root`) holds every module whose code a loader gives (sources, `.pyc`
    files, zip archives) that lies inside the bundle, with paths relative to it."""
    for loaded_first in ("native_host.cli", "native_host.files"):  # as at every start
        __import__(loaded_first)
    external = sys.modules["_frozen_importlib_external"]
    finished: list[Any] = []
    wrapped: set[int] = set()

    def recorded(loader: Any, origin: str) -> bool:
        if sealed_root is None:
            return isinstance(loader, external.SourceFileLoader) and origin.endswith(".py")
        return hasattr(loader, "get_code") and origin.endswith((".py", ".pyc"))

    class Recorder:
        """Finds nothing itself: notes each module written in Python once the finder
        that found it has executed it, the order in which a start finishes them. One
        loader may serve many modules (a zip archive's): it is wrapped once."""

        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
            for finder in sys.meta_path[1:]:
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader: Any = spec.loader
            if recorded(loader, str(spec.origin)) and id(loader) not in wrapped:
                wrapped.add(id(loader))
                run = loader.exec_module

                def record(module: Any) -> None:
                    run(module)
                    finished.append(module)

                loader.exec_module = record
            return spec

    sys.meta_path.insert(0, Recorder)
    try:
        for root in ROOTS:
            __import__(root)
    finally:
        sys.meta_path.remove(Recorder)
    entries = [
        _sealed_entry(module, sealed_root) if sealed_root is not None else _linked_entry(module)
        for module in finished
    ]
    sys.stdout.buffer.write(
        _header(sealed_root is not None) + marshal.dumps(tuple(e for e in entries if e))
    )
    sys.stdout.buffer.flush()


def _linked_entry(module: Any) -> Entry:
    """A module compiled from its source, with what proves the source unchanged."""
    origin = module.__file__
    with open(origin, "rb") as source:
        info = os.fstat(source.fileno())
        code = compile(source.read(), origin, "exec", dont_inherit=True, optimize=0)
    package = hasattr(module, "__path__")
    return (module.__name__, origin, package, info.st_mtime_ns, info.st_size, code)


def _sealed_entry(module: Any, root: str) -> Entry | None:
    """A module of the bundle in `root`, with the code its own loader gives (None for a
    module from outside the bundle: it is imported the usual way)."""
    origin = os.path.abspath(module.__file__)
    base = os.path.abspath(root)
    if os.path.commonpath([origin, base]) != base:
        return None
    relative = os.path.relpath(origin, base).replace(os.sep, "/")
    code = module.__loader__.get_code(module.__name__)
    # Named relative to the bundle, as the entry is: the building machine's folder is no
    # part of the image (two builds of one commit write the same bytes), and `_in_bundle`
    # names each code object after the folder it is installed in.
    import _imp

    _imp._fix_co_filename(code, relative)  # type: ignore[attr-defined]
    return (module.__name__, relative, hasattr(module, "__path__"), 0, 0, code)


# -- reading (the launcher's start, doctor) ------------------------------------------------
def read(path: str) -> Sequence[Entry]:
    """The image's entries when every one can be executed as it stands; ImageUnusable
    saying why not. The one reader of the image: the launcher's start and doctor."""
    from native_host import files

    try:
        data = files.read_trusted(path, MAX_IMAGE_BYTES)
    except files.FileRefusedError as exc:
        state = MISSING if exc.reason == files.MISSING else REFUSED
        raise ImageUnusable(state, f"{exc.explanation}: install again") from None
    sealed = data.startswith(_header(sealed=True))
    header = _header(sealed)
    if not data.startswith(header):
        raise ImageUnusable(FOREIGN, "written by another interpreter or format: install again")
    try:
        entries: Sequence[Entry] = marshal.loads(memoryview(data)[len(header) :])
        shapes = {tuple(map(type, entry)) for entry in entries}
    except (EOFError, ValueError, TypeError) as exc:
        raise ImageUnusable(DAMAGED, f"cannot be read back ({exc}): install again") from None
    if not isinstance(entries, tuple) or shapes - {_ENTRY_TYPES}:
        raise ImageUnusable(DAMAGED, "it holds something other than modules: install again")
    if sealed:
        return _in_bundle(entries, os.path.dirname(os.path.abspath(path)))
    for name, origin, _, mtime_ns, size, _ in entries:
        try:
            info = os.stat(origin)
        except (OSError, ValueError):
            raise ImageUnusable(STALE, f"{origin} is gone: install again") from None
        if (info.st_mtime_ns, info.st_size) != (mtime_ns, size):
            raise ImageUnusable(STALE, f"{name} changed since install: install again")
    return entries


def _in_bundle(entries: Sequence[Entry], root: str) -> Sequence[Entry]:
    """A sealed image's entries with their paths in the bundle at `root`, where it is now
    (each user's own folder), tracebacks included; one that would leave the bundle (`..`,
    an absolute path) damages the image."""
    import _imp

    placed = []
    for name, relative, package, mtime_ns, size, code in entries:
        parts = relative.split("/")
        if not relative or os.path.isabs(relative) or ".." in parts or ":" in relative:
            raise ImageUnusable(DAMAGED, f"{name} would be outside the bundle: install again")
        origin = os.path.join(root, *parts)
        _imp._fix_co_filename(code, origin)  # type: ignore[attr-defined]  # as for a .pyc
        placed.append((name, origin, package, mtime_ns, size, code))
    return tuple(placed)


_ENTRY_TYPES = (str, str, bool, int, int, type(read.__code__))
"""What every entry is made of: anything else is not an image `build` wrote (a string in
place of code would be compiled and run by `exec`)."""


def load(entries: Sequence[Entry]) -> None:
    """Execute each entry into a new module, as importing it would; a module already
    imported stays as it is. A package executes after the children its body imports
    (that is the order), so a child's parent is put in `sys.modules` ahead of its body,
    as the import system does while the parent's body runs."""
    bootstrap = sys.modules["_frozen_importlib"]
    loader_type = sys.modules["_frozen_importlib_external"].SourceFileLoader
    modules = sys.modules
    fresh = {}
    for name, origin, package, _, _, _ in entries:
        loader = loader_type(name, origin)
        spec = bootstrap.ModuleSpec(name, loader, origin=origin, is_package=package)
        spec.has_location = True
        module = type(sys)(name)
        module.__spec__, module.__loader__, module.__file__ = spec, loader, origin
        if package:
            module.__path__ = spec.submodule_search_locations = [os.path.dirname(origin)]
        module.__package__ = spec.parent
        fresh[name] = module
    for name, _, _, _, _, code in entries:
        module = fresh[name]
        if modules.setdefault(name, module) is not module:
            continue
        parent, _, child = name.rpartition(".")
        if parent in fresh:
            setattr(modules.setdefault(parent, fresh[parent]), child, module)
        elif parent:
            setattr(modules[parent], child, module)
        try:
            exec(code, module.__dict__)
        except BaseException:
            del modules[name]
            raise


def use(path: str) -> str:
    """Load the image at `path` if it can be used; the state word for the log."""
    try:
        load(read(path))
    except ImageUnusable as exc:
        return exc.state
    return LOADED
