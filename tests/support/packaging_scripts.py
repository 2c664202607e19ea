"""The build scripts under packaging/, loaded by path: that folder is not a Python package
(the name `packaging` is PyPI's), and its scripts run on the build machine's own Python."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.checkout import REPO

WINDOWS = REPO / "packaging" / "windows"


def windows_module(name: str) -> ModuleType:
    """packaging/windows/<name>.py, loaded once (the scripts import each other by name)."""
    if name in sys.modules:
        return sys.modules[name]
    if str(WINDOWS) not in sys.path:
        sys.path.insert(0, str(WINDOWS))
    spec = importlib.util.spec_from_file_location(name, WINDOWS / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no {name}.py in {WINDOWS}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
