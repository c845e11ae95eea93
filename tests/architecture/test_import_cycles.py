"""Contract: no two modules of the package import each other, directly or through others, counting every
import: at module level, inside functions and under `if TYPE_CHECKING:` (an annotation-only import is
still a dependency a reader has to follow). The checker proves itself on a planted cycle."""

from __future__ import annotations

import ast
import shutil
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests.architecture.test_layering import PACKAGE, ROOT, _resolve


def module_name(root: Path, path: Path) -> str:
    parts = [ROOT, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` and the modules of the package it imports, any way."""
    paths = {module_name(root, path): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(package, node.module, node.level)
                found.update({base, *(f"{base}.{alias.name}" for alias in node.names)})
        graph[name] = {target for target in found if target in paths and target != name}
    return graph


def cycle(root: Path) -> list[str]:
    """One import cycle of the package at `root`, as the modules in it; empty when there is none."""
    try:
        TopologicalSorter(import_graph(root)).prepare()
    except CycleError as error:
        return list(error.args[1])
    return []


def test_the_package_has_no_import_cycle() -> None:
    assert cycle(PACKAGE) == []


def test_a_planted_cycle_through_type_checking_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / ROOT
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted = "import typing\n\nif typing.TYPE_CHECKING:\n    from icepack_dagster.engine import other\n"
    (copy / "engine" / "planted.py").write_text(planted)
    (copy / "engine" / "other.py").write_text("from . import planted\n")
    assert {"icepack_dagster.engine.planted", "icepack_dagster.engine.other"} <= set(cycle(copy))
