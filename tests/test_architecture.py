"""The architecture contract: imports point one way (docs/architecture.md).

The layers live in pyproject.toml (`[tool.importlinter]`); import-linter checks them and
this file also refuses any import cycle, inside a layer or a package. Both are proven
able to fail on a copy of the package with one upward import planted in it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter with the project's contract on the package found under `root`."""
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "from importlinter.cli import lint_imports\n"
        f"sys.exit(lint_imports(config_filename={str(REPO / 'pyproject.toml')!r}, no_cache=True))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root
    )


def import_cycles(package: str) -> list[list[str]]:
    """Every strongly connected group of modules that import each other (Tarjan)."""
    graph = grimp.build_graph(package, include_external_packages=False)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return cycles


def test_the_layers_contract_is_kept() -> None:
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_the_architecture_picture_is_the_contract() -> None:
    """docs/architecture.md draws the layers; they must be pyproject's, in order."""
    import tomllib

    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contract["contracts"] if c["type"] == "layers"]
    wanted = [
        sorted(m.strip().removeprefix("native_host.") for m in line.split("|")) for line in layers
    ]
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    drawn = [
        sorted(name.strip() for name in line.split("  ")[0].split("|"))
        for line in block.strip().splitlines()
        if line.strip() and not line.strip().startswith("▼")
    ]
    assert drawn == wanted


def test_no_module_takes_part_in_an_import_cycle() -> None:
    assert import_cycles("native_host") == []


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The contract can fail: the core reaching up into the relay is caught."""
    shutil.copytree(REPO / "native_host", tmp_path / "native_host")
    lines = tmp_path / "native_host" / "core" / "lines.py"
    lines.write_text(lines.read_text() + "\nfrom native_host import relay  # planted\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "native_host.core.lines -> native_host.relay" in done.stdout


def test_a_cycle_is_found(tmp_path: Path) -> None:
    package = tmp_path / "loop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from loop import b\n")
    (package / "b.py").write_text("from loop import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert import_cycles("loop") == [["loop.a", "loop.b"]]
    finally:
        sys.path.remove(str(tmp_path))
