"""Every module the relay can import, in one file read in one go: the launcher's start
(issues 19, 30).

Chrome starts a host for every `connectNative`, and the first answer waits for some forty
Python modules: the relay's own and the standard library's it uses (json, re, enum, ...).
Through importlib each one costs a search of its directory, a stat of its source, an open
and read of its `.pyc` and the import system's Python bookkeeping; together, more than
the host's own work before its answer. So `install` writes, next to the launcher, an
image (docs/install.md, "The start image"), compiled by the launcher's interpreter, each
module with the size and modification time of its source:

- the modules a relay start imports, in the order a start finishes importing them,
  executed into module objects at start, as the import system would;
- every other module written in Python that the relay may import later (`LATER`: the
  origin policy, the subscriptions, the Desktop's launch, the IDNA tables, ...), kept in
  memory as marshalled code and executed on its first import by `HeldModules`.

So a running host never reads Python code from disk after its start (issue 30): an
upgrade of the package under a live host (pipx, uv, `install.sh`, pip) cannot mix the
new version's modules with the old, which is what made hosts answer "internal error"
after an upgrade. The launcher runs `cli.start`, which reads the image under the rule
every file the host reads obeys (`files.read_trusted`), checks that every source is the
one compiled, and loads it.

Anything amiss (a source changed by an upgrade of the package or of Python that
`install` did not follow, another interpreter, a refused or damaged file) leaves the
image unused: the modules then load the usual way, the relay imports everything `LATER`
names before it serves (`import_later`: the same guarantee, at the cost of the imports),
its first log line says why, and `doctor` says what to do.

A bundle that carries its own interpreter (the Windows MSI, packaging/windows) ships a
*sealed* image instead, written when the bundle is built: its modules' paths are relative
to the bundle, it holds the standard library's modules too (the embeddable CPython keeps
them compiled in a zip), and it is not proven against the sources at each start. It is
part of the bundle as the bundle's `.pyc` files and DLLs are: built from the same files,
installed and removed with them by one package, in a folder only the user can write (the
reader still refuses it otherwise). Under Wine a stat costs about 1.5 ms, and proving an
image of 120 modules would cost more than the image saves.

What an image cannot hold: compiled extension modules (`.so`, `.pyd`). Those the relay
may load later come with the interpreter (the standard library's `select`,
`unicodedata`, ...), which no update of this package replaces; a frozen bundle keeps
them in a folder of its version that stays until no host uses it
(native_host/install/versions.py).
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import CodeType, ModuleType
    from typing import Any

    Entry = tuple[str, str, bool, int, int, CodeType]
    """name, source path, is a package, the source's st_mtime_ns and st_size, its code.
    In a sealed image the path is relative to the image's folder (`/`-separated) and the
    two numbers are 0: nothing is proven against the source."""
    HeldEntry = tuple[str, str, bool, int, int, int, int]
    """The same for a module held until its first import, its code marshalled in the
    image's last part: its offset there and its length."""

IMAGE_NAME = "pedelec-native-host.image"
"""The image's file name, next to the launcher."""
MAX_IMAGE_BYTES = 16 * 1_048_576
FORMAT = "pedelec-start-image 2"
SEALED_FORMAT = "pedelec-start-image 2 sealed"
"""The format line of a bundle's image (its paths relative to the image's folder)."""
ROOTS = ("native_host.relay", "native_host.extension")
"""What a relay start imports after `cli`, this module and `files` (which read the image):
the image holds these and everything they import that is written in Python, executed at
start."""
EVERY = ("linux", "darwin", "win32")
POSIX = ("linux", "darwin")
LATER: dict[str, tuple[str, ...]] = {
    "native_host.policy": EVERY,  # an origin to check, a host-local request
    "native_host.origins": EVERY,
    "native_host.subscriptions": EVERY,  # subscribe_thread
    "native_host.launch.launcher": EVERY,  # a Core that is down: the Desktop's launch
    "native_host.launch.macos": EVERY,  # what LaunchServices would open (macOS only runs it)
    "subprocess": EVERY,  # the launch itself
    "shutil": EVERY,  # a `#!` Desktop through `env NAME` (shutil.which)
    "idna": EVERY,  # an internationalised origin
    "idna.uts46data": EVERY,  # which idna imports on its first mapping
    "encodings.punycode": EVERY,  # the codec idna encodes labels with
    "ipaddress": EVERY,  # an IPv6 origin
    "encodings.utf_8_sig": EVERY,  # the codec the origin policy file is read with
    "heapq": EVERY,  # requests waiting for a place (admission)
    "threading": EVERY,  # the same, and the log's lock
    "traceback": EVERY,  # a request that crashed, in the log
    "native_host.versions": EVERY,  # what a host does as it exits (old versions' removal)
    "grp": POSIX,  # a file in the user's private group (files.is_private_group)
    "pwd": POSIX,
    "plistlib": ("darwin",),  # the Desktop's Info.plist (launch/macos.py)
    "xml.parsers.expat": ("darwin",),
    "ctypes": ("darwin", "win32"),  # the peer check and the launch's system calls
    "ctypes.wintypes": ("win32",),
    "msvcrt": ("win32",),
    "native_host.windows_acl": ("win32",),  # loaded by the image's own read there
    "_winapi": ("win32",),
}
"""What the relay may import after its start, on the systems whose code paths import it
(sys.platform): the image holds these and everything they import that is written in
Python, until their first import. Found by reading every import inside a function of the
relay's modules (tests/test_startimage.py checks the list against the sources) and by
driving every request a host answers under an audit hook that fails on any import from
disk after its start (tests/test_live_upgrade.py)."""
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
SERVING_EVENT = "native_host.relay.serve"
"""The audit event (`sys.audit`) a relay raises once everything it may ever import is in
memory, just before it reads its first frame: an audit hook can tell start-up from
serving by it (tests/test_live_upgrade.py)."""


class ImageUnusable(Exception):
    """The image cannot be used; `state` is one of the words above, `detail` says why."""

    def __init__(self, state: str, detail: str) -> None:
        super().__init__(f"{state}: {detail}")
        self.state = state
        self.detail = detail


class Image:
    """What `read` found: the version of the package it was written from, the modules a
    start executes, and the ones held until their first import, whose code stays in the
    image file (`fd`, open when asked to hold it) from `code_at` on."""

    __slots__ = ("code_at", "fd", "held", "info", "path", "sealed", "start", "version")

    def __init__(
        self,
        path: str,
        version: str,
        start: Sequence[Entry],
        held: Sequence[HeldEntry],
        sealed: bool,
        fd: int | None = None,
        info: os.stat_result | None = None,
        code_at: int = 0,
    ) -> None:
        self.path = path
        self.version = version
        self.start = start
        self.held = held
        self.sealed = sealed
        self.fd = fd
        self.info = info
        self.code_at = code_at

    def __len__(self) -> int:
        return len(self.start) + len(self.held)

    def names(self) -> set[str]:
        return {entry[0] for entry in self.start} | {entry[0] for entry in self.held}


INDEX_LENGTH_BYTES = 8
"""After the format line: the length of the index (the start entries, the held ones'
places and the package's version), little-endian; the held modules' code follows it."""


def _header(sealed: bool = False) -> bytes:
    """The interpreter's bytecode magic (what a `.pyc` starts with), then the format."""
    magic: bytes = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
    return magic + (SEALED_FORMAT if sealed else FORMAT).encode() + b"\n"


def later_roots(platform: str = sys.platform) -> list[str]:
    """`LATER`'s modules for this system."""
    system = "linux" if platform.startswith("linux") else platform
    return [name for name, systems in LATER.items() if system in systems]


# -- writing (install) -----------------------------------------------------------------
def build(
    python: str | Sequence[str],
    options: Sequence[str],
    import_paths: Sequence[str],
    sealed_root: str | None = None,
    only_these_paths: bool = False,
    environment: Mapping[str, str] | None = None,
) -> bytes:
    """The image for a launcher that runs `python` (a path, or a command such as
    `wine python.exe`) with these options and import paths: recorded and compiled by that
    very interpreter, so it holds what that launcher imports. `sealed_root`: a sealed
    image of the bundle in that folder (as the interpreter names it). `only_these_paths`:
    the import paths replace the interpreter's own (a PyInstaller bundle's modules,
    recorded by the interpreter it was frozen from). `environment`: the interpreter's
    (this process's when None). OSError when it cannot be built."""
    import subprocess

    command = [python] if isinstance(python, str) else list(python)
    assign = "sys.path[:] =" if only_these_paths else "sys.path +="
    code = (
        f"import sys; {assign} {list(import_paths)!r}; "
        f"from native_host import startimage; startimage.write_recorded({sealed_root!r})"
    )
    try:
        done = subprocess.run(
            [*command, *options, "-c", code],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=BUILD_TIMEOUT_S,
            env=environment,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise OSError(f"{' '.join(command)} could not be run: {exc}") from None
    wanted = (SEALED_FORMAT if sealed_root is not None else FORMAT).encode() + b"\n"
    if done.returncode != 0 or wanted not in done.stdout[:64]:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise OSError(f"{' '.join(command)} exited with status {done.returncode}: {' '.join(last)}")
    return done.stdout


def write_recorded(sealed_root: str | None = None) -> None:
    """Import `ROOTS`, then `LATER`'s modules for this system, as a relay does, and write
    their image to stdout: what `build` runs in the launcher's interpreter. A linked
    image holds the modules read from `.py` sources, each with its source's size and
    mtime; a sealed one (the bundle in `sealed_root`) holds every module whose code a
    loader gives (sources, `.pyc` files, zip archives) that lies inside the bundle, with
    paths relative to it."""
    if sealed_root is not None:
        _look_inside(sealed_root)
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
        at_start = len(finished)
        for root in later_roots():
            __import__(root)
    finally:
        sys.meta_path.remove(Recorder)

    def entry(module: Any) -> Entry | None:
        if sealed_root is None:
            return _linked_entry(module)
        return _sealed_entry(module, sealed_root)

    start = [e for e in map(entry, finished[:at_start]) if e]
    held, code, offset = [], [], 0
    for found in map(entry, finished[at_start:]):
        if found is not None:
            code.append(marshal.dumps(found[5]))
            held.append((*found[:5], offset, len(code[-1])))
            offset += len(code[-1])
    version: str = sys.modules["native_host"].__version__
    index = marshal.dumps((tuple(start), tuple(held), version))
    out = sys.stdout.buffer
    out.write(_header(sealed_root is not None))
    out.write(len(index).to_bytes(INDEX_LENGTH_BYTES, "little") + index)
    out.write(b"".join(code))
    out.flush()


def _look_inside(root: str) -> None:
    """Packages the recording interpreter imported at its own start (`encodings`) from its
    own library: their submodules are looked for in the bundle's copy, where the bundle's
    executable finds them, when the bundle has one."""
    base = os.path.abspath(root)
    inside = [p for p in sys.path if os.path.abspath(p).startswith(base + os.sep)]
    for name, module in list(sys.modules.items()):
        if getattr(module, "__path__", None) is None:
            continue
        for entry in inside:
            copy = os.path.join(entry, *name.split("."))
            if os.path.isdir(copy):
                module.__path__ = [copy]
                break


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
def read(path: str, hold: bool = False) -> Image:
    """The image when every entry can be used as it stands; ImageUnusable saying why
    not. The one reader of the image: the launcher's start and doctor. With `hold`, the
    image file stays open in the returned image, for `load` (the held modules' code is
    read from it when first imported: never read again by name, which an upgrade may
    have given to another file), and marked as used by this process for as long as it
    runs (`files.hold_shared`: what tells `doctor` and the removal of old versions that a
    host still runs from it)."""
    from native_host import files

    try:
        fd, info = files.open_trusted(path, MAX_IMAGE_BYTES, held=hold)
    except files.FileRefusedError as exc:
        state = MISSING if exc.reason == files.MISSING else REFUSED
        raise ImageUnusable(state, f"{exc.explanation}: install again") from None
    try:
        if hold:  # before anything is read: a remover holding it is done first
            files.hold_shared(fd)
        image = _read_open(path, fd, info, prove=True)
    except OSError as exc:
        os.close(fd)
        raise ImageUnusable(DAMAGED, f"cannot be read back ({exc}): install again") from None
    except BaseException:
        os.close(fd)
        raise
    if hold:
        image.fd, image.info = fd, info
    else:
        os.close(fd)
    return image


def written_version(path: str) -> str | None:
    """The version of the package an image was written from, whatever its state now
    (stale included); None when it cannot be read."""
    from native_host import files

    try:
        fd, info = files.open_trusted(path, MAX_IMAGE_BYTES)
    except files.FileRefusedError:
        return None
    try:
        return _read_open(path, fd, info, prove=False).version
    except (ImageUnusable, OSError):
        return None
    finally:
        os.close(fd)


def _read_open(path: str, fd: int, info: os.stat_result, prove: bool) -> Image:
    """The image read from `fd`; with `prove`, every linked entry's source checked."""
    sealed_header = _header(sealed=True)
    head = _read_at(fd, 0, len(sealed_header) + INDEX_LENGTH_BYTES)
    sealed = head.startswith(sealed_header)
    header = _header(sealed)
    if not head.startswith(header) or len(head) < len(header) + INDEX_LENGTH_BYTES:
        raise ImageUnusable(FOREIGN, "written by another interpreter or format: install again")
    length = int.from_bytes(head[len(header) :][:INDEX_LENGTH_BYTES], "little")
    code_at = len(header) + INDEX_LENGTH_BYTES + length
    try:
        if code_at > info.st_size:
            raise EOFError(f"an index of {length} bytes in a file of {info.st_size}")
        index = _read_at(fd, len(header) + INDEX_LENGTH_BYTES, length)
        if len(index) != length:
            raise EOFError(f"{len(index)} bytes of an index of {length}")
        start, held, version = marshal.loads(index)
        shapes = {tuple(map(type, entry)) for entry in start}
        held_shapes = {tuple(map(type, entry)) for entry in held}
    except (EOFError, ValueError, TypeError) as exc:
        raise ImageUnusable(DAMAGED, f"cannot be read back ({exc}): install again") from None
    if (
        not isinstance(start, tuple)
        or not isinstance(held, tuple)
        or not isinstance(version, str)
        or shapes - {_ENTRY_TYPES}
        or held_shapes - {_HELD_TYPES}
    ):
        raise ImageUnusable(DAMAGED, "it holds something other than modules: install again")
    if any(e[5] < 0 or e[6] < 0 or code_at + e[5] + e[6] > info.st_size for e in held):
        raise ImageUnusable(DAMAGED, "a held module's code lies outside it: install again")
    if sealed:
        root = os.path.dirname(os.path.abspath(path))
        placed = _in_bundle(start, root), _in_bundle(held, root)
        return Image(path, version, *placed, sealed=True, code_at=code_at)
    for entry in (*start, *held) if prove else ():
        name, origin, _, mtime_ns, size = entry[:5]
        try:
            found = os.stat(origin)
        except (OSError, ValueError):
            raise ImageUnusable(STALE, f"{origin} is gone: install again") from None
        if (found.st_mtime_ns, found.st_size) != (mtime_ns, size):
            raise ImageUnusable(STALE, f"{name} changed since install: install again")
    return Image(path, version, start, held, sealed=False, code_at=code_at)


if hasattr(os, "pread"):

    def _read_at(fd: int, offset: int, length: int) -> bytes:
        """Up to `length` bytes at `offset` (fewer at the file's end)."""
        chunks, got = [], 0
        while got < length:
            chunk = os.pread(fd, length - got, offset + got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

else:  # Windows: no pread; seek and read, one thread at a time
    import _thread

    _SEEK_LOCK = _thread.allocate_lock()

    def _read_at(fd: int, offset: int, length: int) -> bytes:
        """Up to `length` bytes at `offset` (fewer at the file's end)."""
        chunks, got = [], 0
        with _SEEK_LOCK:
            os.lseek(fd, offset, os.SEEK_SET)
            while got < length:
                chunk = os.read(fd, length - got)
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)


def _in_bundle(entries: Sequence[Any], root: str) -> tuple[Any, ...]:
    """A sealed image's entries with their paths in the bundle at `root`, where it is now
    (each user's own folder); one that would leave the bundle (`..`, an absolute path)
    damages the image. A start entry's code names its new path at once, as for a `.pyc`
    (tracebacks included); a held entry's when it is first imported."""
    import _imp

    placed = []
    for name, relative, *rest in entries:
        parts = relative.split("/")
        if not relative or os.path.isabs(relative) or ".." in parts or ":" in relative:
            raise ImageUnusable(DAMAGED, f"{name} would be outside the bundle: install again")
        origin = os.path.join(root, *parts)
        if len(rest) == 4:  # a start entry: its code
            _imp._fix_co_filename(rest[3], origin)  # type: ignore[attr-defined]
        placed.append((name, origin, *rest))
    return tuple(placed)


_ENTRY_TYPES = (str, str, bool, int, int, type(read.__code__))
"""What every entry executed at start is made of: anything else is not an image `build`
wrote (a string in place of code would be compiled and run by `exec`)."""
_HELD_TYPES = (str, str, bool, int, int, int, int)


def _spec(name: str, origin: str, package: bool, loader: Any) -> Any:
    """The module spec the import system would make for a module at `origin`."""
    bootstrap = sys.modules["_frozen_importlib"]
    spec = bootstrap.ModuleSpec(name, loader, origin=origin, is_package=package)
    spec.has_location = True
    if package:
        spec.submodule_search_locations = [os.path.dirname(origin)]
    return spec


class HeldModules:
    """The first finder on `sys.meta_path` once an image is loaded: a module the image
    holds is executed from the image file opened at start, never looked for on disk by
    name (an upgrade may have put another version's module there since)."""

    def __init__(self, image: Image) -> None:
        assert image.fd is not None and image.info is not None, "read(..., hold=True)"
        self.image = image
        self.held: Mapping[str, HeldEntry] = {entry[0]: entry for entry in image.held}

    def holds(self, name: str) -> bool:
        return name in self.held

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        entry = self.held.get(name)
        if entry is None:
            return None
        return _spec(name, entry[1], entry[2], self)

    def create_module(self, spec: Any) -> None:
        return None  # the import system's default module

    def exec_module(self, module: ModuleType) -> None:
        name, origin, _, _, _, offset, length = self.held[module.__name__]
        image = self.image
        assert image.fd is not None and image.info is not None
        now = os.fstat(image.fd)
        if (now.st_size, now.st_mtime_ns) != (image.info.st_size, image.info.st_mtime_ns):
            raise ImportError(f"the start image changed since this host started: {name}")
        data = _read_at(image.fd, image.code_at + offset, length)
        try:
            code = marshal.loads(data)
        except (EOFError, ValueError, TypeError) as exc:
            raise ImportError(f"the start image's {name} is damaged: {exc}", name=name) from None
        if type(code) is not _ENTRY_TYPES[5]:  # never compile and run anything else
            raise ImportError(f"the start image's {name} is not code", name=name)
        if image.sealed:
            import _imp

            _imp._fix_co_filename(code, origin)  # type: ignore[attr-defined]
        exec(code, module.__dict__)


def load(image: Image) -> None:
    """Execute each start entry into a new module, as importing it would (a module already
    imported stays as it is), then put the held ones behind `HeldModules` (`image` read
    with `hold`). A package
    executes after the children its body imports (that is the order), so a child's
    parent is put in `sys.modules` ahead of its body, as the import system does while the
    parent's body runs."""
    loader_type = sys.modules["_frozen_importlib_external"].SourceFileLoader
    modules = sys.modules
    fresh = {}
    for name, origin, package, _, _, _ in image.start:
        loader = loader_type(name, origin)
        spec = _spec(name, origin, package, loader)
        module = type(sys)(name)
        module.__spec__, module.__loader__, module.__file__ = spec, loader, origin
        if package:
            module.__path__ = spec.submodule_search_locations
        module.__package__ = spec.parent
        fresh[name] = module
    for name, _, _, _, _, code in image.start:
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
    global _held
    _held = HeldModules(image)
    sys.meta_path.insert(0, _held)


_held: HeldModules | None = None
"""The held modules of the image this process loaded, if it did."""


def held_path() -> str | None:
    """The image this process loaded and still holds, if any."""
    if _held is None or _held.image.fd is None:
        return None
    return _held.image.path


def release() -> str | None:
    """Stop marking the loaded image as used by this process (a host about to exit), so
    that the removal of a retired version can tell whether it was the last; its path, or
    None. The image stays open: a module it holds can still be imported."""
    if _held is None or _held.image.fd is None:
        return None
    from native_host import files

    files.let_go(_held.image.fd)
    return _held.image.path


def use(path: str) -> str:
    """Load the image at `path` if it can be used; the state word for the log."""
    try:
        load(read(path, hold=True))
    except ImageUnusable as exc:
        return exc.state
    return LOADED


def import_later() -> list[str]:
    """Import `LATER`'s modules for this system the usual way: what a relay does before it
    serves when no image could be loaded, so that it too never reads code from disk
    afterwards. Returns what could not be imported (the relay logs it and goes on: a
    broken install fails the requests that need it, as it always did)."""
    failed = []
    for name in later_roots():
        try:
            __import__(name)
        except ImportError as exc:
            failed.append(f"{name}: {exc}")
    return failed
