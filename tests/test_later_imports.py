"""Every module the relay may import after its start is one the start image holds for
later (issue 30): `startimage.LATER`, checked against the sources.

An import inside a function runs when the function first does, which for the relay can
be hours after its start, under an upgraded package. Every such import in the modules a
relay can reach must name a module a start has already loaded, or one `LATER` lists
(which the image holds, and a start without an image imports before it serves). This
reads the relay's modules as an import-linter would, and is proven able to fail on a
copy of the package with one such import planted in it. What imports inside the
standard library do is the audit hook's to catch (tests/test_live_upgrade.py).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from native_host import startimage
from tests.support.checkout import REPO

pytestmark = pytest.mark.process  # it imports the relay in a fresh interpreter

SEEDS = (*startimage.ROOTS, "native_host.files", "native_host.startimage")
"""What a relay start imports (the image's roots, and what reads the image)."""
EXEMPT = {
    "_imp": "built into every interpreter and imported before any code runs",
    "ntpath": "os.path on Windows, imported at every start there; elsewhere only asked for "
    "to describe Windows, which the relay never does",
    "posixpath": "os.path on Linux and macOS, imported at every start there",
}


def source_of(root: Path, module: str) -> Path | None:
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports(root: Path, module: str) -> list[tuple[str, bool]]:
    """(imported module, inside a function) for every import of `module` that runs
    (`if TYPE_CHECKING:` blocks left out); `from X import y` names X.y too when y is a
    module of the package."""
    path = source_of(root, module)
    assert path is not None
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", "") == "TYPE_CHECKING":
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                found.append((base, in_function))
                for alias in child.names:
                    if source_of(root, f"{base}.{alias.name}") is not None:
                        found.append((f"{base}.{alias.name}", in_function))
            functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            visit(child, in_function or isinstance(child, functions))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def later_imports(root: Path) -> dict[str, set[str]]:
    """Every module imported inside a function of a package module the relay can reach
    from `SEEDS` under `root`, with the modules that import it."""
    seen: set[str] = set()
    todo = list(SEEDS)
    inside: dict[str, set[str]] = {}
    while todo:
        module = todo.pop()
        if module in seen or not module.startswith("native_host"):
            continue
        if source_of(root, module) is None:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        for name, in_function in imports(root, module):
            if in_function:
                inside.setdefault(name, set()).add(module)
            todo.append(name)
    return inside


def loaded(root: Path) -> set[str]:
    """What importing `ROOTS` (and what reads the image), then `LATER`'s modules of this
    system, loads in this interpreter: what a host holds in memory once it serves."""
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); "
        + "".join(f"import {name}; " for name in (*SEEDS, *startimage.later_roots()))
        + "print('\\n'.join(sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def uncovered(root: Path) -> dict[str, list[str]]:
    later = set(startimage.LATER)
    covered = loaded(root) | later | set(EXEMPT)
    return {
        name: sorted(by)
        for name, by in later_imports(root).items()
        if name not in covered and not any(name.startswith(f"{held}.") for held in later)
    }


def test_every_import_the_relay_makes_after_its_start_is_held_for_later() -> None:
    assert uncovered(REPO) == {}


def test_an_import_planted_inside_a_function_is_found(tmp_path: Path) -> None:
    shutil.copytree(REPO / "native_host", tmp_path / "native_host")
    subscriptions = tmp_path / "native_host" / "subscriptions.py"
    text = subscriptions.read_text()
    subscriptions.write_text(text + "\n\ndef planted() -> None:\n    import colorsys  # noqa\n")
    assert uncovered(tmp_path) == {"colorsys": ["native_host.subscriptions"]}
