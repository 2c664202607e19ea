"""The release builds' scripts (packaging/linux, packaging/macos, packaging/release),
loaded by path: packaging/ is not a Python package (the name `packaging` is PyPI's), and
its scripts import their neighbours by file name (`import frozen`), as they do when run.

A module is loaded under its file name, so a script's own `import` finds the same module
object the test holds; the two `build.py` are `linux_build` and `macos_build` (and
packaging/windows/build.py keeps `build`)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.checkout import REPO


def release_module(folder: str, name: str) -> ModuleType:
    """packaging/<folder>/<name>.py, loaded once."""
    qualified = f"{folder}_build" if name == "build" else name
    if qualified in sys.modules:
        return sys.modules[qualified]
    for neighbour in ("release", folder):
        path = str(REPO / "packaging" / neighbour)
        if path not in sys.path:
            sys.path.append(path)
    source = REPO / "packaging" / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(qualified, source)
    assert spec is not None and spec.loader is not None, f"no {source}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module
