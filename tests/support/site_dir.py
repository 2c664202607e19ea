"""A lasting install made by copying: the package and the relay's third-party packages in
a site directory of their own (as pip would have put them), the start image `install`
writes and the launcher that starts from it."""

from __future__ import annotations

import importlib.util
import marshal
import shutil
import sys
from pathlib import Path
from typing import Any

from native_host import __version__, files, startimage
from native_host.install.contents import IMAGE_ENTRY, interpreter_options, launcher_text
from native_host.install.locations import Os
from tests.support.checkout import REPO

RELAY_DEPENDENCIES = ("idna",)
"""What a relay may import from outside the standard library (pyproject's dependencies
minus pydantic, which only commands load)."""
READ_FIRST = {"native_host", "native_host.cli", "native_host.startimage", "native_host.files"}
"""What a start imports before it can read its image."""


def copy_dependencies(site: Path) -> None:
    """Copy the relay's third-party packages, as this interpreter has them, into `site`."""
    for name in RELAY_DEPENDENCIES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations, f"{name} is not installed"
        source = Path(next(iter(spec.submodule_search_locations)))
        shutil.copytree(source, site / name, ignore=shutil.ignore_patterns("__pycache__"))


class Install:
    """A copy of the package (of `source`, a tree holding `native_host/`) in its own
    site directory, its image and its `#!` launcher, as `install` writes them."""

    def __init__(self, root: Path, source: Path = REPO) -> None:
        self.site = root / "site"
        shutil.copytree(
            source / "native_host",
            self.site / "native_host",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        copy_dependencies(self.site)
        self.image = root / "launcher-dir" / startimage.IMAGE_NAME
        self.image.parent.mkdir(mode=0o700)
        self.write_image()
        self.launcher = self.image.parent / "pedelec-native-host"
        self.launcher.write_bytes(
            launcher_text(Os.LINUX, sys.executable, [str(self.site)], image=str(self.image))
        )
        self.launcher.chmod(0o700)

    def write_image(self) -> None:
        """The image of what the site directory holds now, renamed into place (what
        `install` does)."""
        paths = [str(self.site)]
        options = interpreter_options(paths)
        built = startimage.build(sys.executable, options, paths)
        files.atomic_write(self.image, built, files.PRIVATE_FILE_MODE)

    def traced(self) -> list[str]:
        """The launcher's command, under `-X importtime`."""
        entry = IMAGE_ENTRY.format(image=repr(str(self.image)))
        code = f"import sys; sys.path += [{str(self.site)!r}]; {entry.removeprefix('import sys; ')}"
        return [sys.executable, "-X", "importtime", "-I", "-S", "-c", code]


def image_parts(path: Path) -> tuple[bytes, tuple[Any, ...], tuple[Any, ...], bytes]:
    """An image as written: its format line, the start entries, the held ones, and the
    held modules' code (native_host/startimage.py, "INDEX_LENGTH_BYTES"); the index's
    last item, the version, is this checkout's (`image_bytes` puts it back)."""
    data = path.read_bytes()
    sealed = data.startswith(startimage._header(sealed=True))
    header = startimage._header(sealed)
    at = len(header) + startimage.INDEX_LENGTH_BYTES
    length = int.from_bytes(data[len(header) : at], "little")
    start, held, version = marshal.loads(data[at : at + length])
    assert version == __version__, version
    return header, start, held, data[at + length :]


def image_bytes(header: bytes, index: Any, code: bytes = b"") -> bytes:
    """An image of these parts, `index` the (start entries, held entries) pair, to which
    this checkout's version is added when it is one (any part may be made wrong on
    purpose by the tests)."""
    if isinstance(index, tuple) and len(index) == 2:
        index = (*index, __version__)
    data = marshal.dumps(index)
    return header + len(data).to_bytes(startimage.INDEX_LENGTH_BYTES, "little") + data + code
