"""Import layering, checked on the source: `domain/` is pure (no dagster, pyiceberg or pyspark, and
none of the adapter or wiring packages); only `spark/` imports pyspark; only `defs/` and
`definitions.py` import dagster. Imports under `if TYPE_CHECKING:` are annotations, not dependencies,
and are ignored; imports inside functions count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "icepack_dagster"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path) -> set[str]:
    """Dotted names of every module imported at run time by a source file."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found


def modules() -> list[tuple[str, set[str]]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), runtime_imports(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _uses(imports: set[str], top: str) -> bool:
    return any(name == top or name.startswith(f"{top}.") for name in imports)


def test_the_walker_sees_imports_and_skips_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nimport dagster as dg\n"
        "if TYPE_CHECKING:\n    from pyspark.sql import SparkSession\n"
        "def f():\n    from pyiceberg.catalog import load_catalog\n"
    )
    assert runtime_imports(source) == {"typing", "dagster", "pyiceberg.catalog"}


@pytest.mark.parametrize("forbidden", ["dagster", "pyiceberg", "pyspark", "sqlalchemy"])
def test_domain_is_pure(forbidden: str) -> None:
    offenders = [m for m, imports in modules() if m.startswith("domain/") and _uses(imports, forbidden)]
    assert offenders == [], f"domain/ must not import {forbidden}: {offenders}"


def test_domain_does_not_reach_outward() -> None:
    outward = [f"icepack_dagster.{p}" for p in ("defs", "iceberg", "spark", "engine", "definitions", "state")]
    offenders = [
        m for m, imports in modules() if m.startswith("domain/") and any(_uses(imports, o) for o in outward)
    ]
    assert offenders == []


def test_only_spark_imports_pyspark() -> None:
    offenders = [m for m, imports in modules() if _uses(imports, "pyspark") and not m.startswith("spark/")]
    assert offenders == []


def test_only_defs_and_definitions_import_dagster() -> None:
    allowed = ("defs/", "definitions.py")
    offenders = [m for m, imports in modules() if _uses(imports, "dagster") and not m.startswith(allowed)]
    assert offenders == []
    assert any(m.startswith("defs/") and _uses(i, "dagster") for m, i in modules())
