"""Import layering, checked on the source over the whole import graph: every `import`, every
`from ... import` (absolute or relative) and every dynamic import (`importlib.import_module`,
`__import__`) with a literal name, at module level or inside functions. Imports under
`if TYPE_CHECKING:` are annotations, not dependencies, and are ignored.

The rules: `domain/` imports no dagster, pyiceberg, pyspark, yaml or sqlalchemy, and nothing of the
configuration, adapter, engine or Dagster layers; `config/` imports no dagster, pyiceberg, pyspark or
sqlalchemy and nothing but `domain/` of the package (everyone above the domain may read it);
`iceberg/`, `spark/`, `store/` and `alerting/` import no dagster and neither the Dagster layer (`defs/`,
`definitions.py`, `component/`) nor the engine; the Dagster layer imports no pyiceberg or pyspark
(it reaches them through the adapters); only `spark/` imports pyspark; only the Dagster layer imports
dagster, and every module of `defs/` does. Only `config/settings.py` reads the environment and only
`domain/clock.py` reads the clock. The shape holds too: the package's top level keeps only
`definitions.py`, `exceptions.py` and `__init__.py`, and no folder holds more than 15 modules directly.
The checker proves itself: each rule's violation, planted
in a copy of the package, is reported.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "icepack_dagster"
ROOT = "icepack_dagster"
DAGSTER_LAYER = ("defs/", "definitions.py", "component/")
ADAPTERS = ("iceberg/", "spark/", "store/", "alerting/")
TOP_LEVEL = {"__init__.py", "definitions.py", "exceptions.py"}
MAX_MODULES_PER_FOLDER = 15
_DYNAMIC = {"import_module", "__import__"}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(package: str, module: str | None, level: int) -> str:
    """The absolute name of `from <level dots><module> import ...` written in `package`."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _dynamic_target(node: ast.Call) -> str | None:
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    if name not in _DYNAMIC or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def runtime_imports(path: Path, package: str) -> set[str]:
    """Dotted names of every module a source file (in dotted `package`) imports at run time."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(package, node.module, node.level)
            found.add(base)
            # `from . import x` and `from pkg import module` name modules too
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and (target := _dynamic_target(node)) is not None:
            found.add(_resolve(package, target.lstrip("."), len(target) - len(target.lstrip("."))))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found


def modules(root: Path) -> list[tuple[str, set[str]]]:
    """(path relative to the package, imports) for every module of the package at `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        package = ".".join([ROOT, *relative.parent.parts])
        found.append((relative.as_posix(), runtime_imports(path, package)))
    return found


def _uses(imports: set[str], top: str) -> bool:
    return any(name == top or name.startswith(f"{top}.") for name in imports)


def _ours(*names: str) -> list[str]:
    return [f"{ROOT}.{name}" for name in names]


# (whose modules, what they must not import)
FORBIDDEN: list[tuple[tuple[str, ...], list[str]]] = [
    (("domain/",), ["dagster", "pyiceberg", "pyspark", "yaml", "sqlalchemy"]),
    (("domain/",), _ours("config", "defs", "definitions", "component", "iceberg", "spark", "store", "engine",
                         "cli", "alerting")),
    (("config/",), ["dagster", "pyiceberg", "pyspark", "sqlalchemy"]),
    (("config/",), _ours("defs", "definitions", "component", "iceberg", "spark", "store", "engine", "cli",
                         "alerting")),
    (ADAPTERS, ["dagster", *_ours("defs", "definitions", "component", "engine", "cli")]),
    (DAGSTER_LAYER, ["pyiceberg", "pyspark"]),
]


def violations(root: Path) -> list[str]:
    """Every broken rule in the package at `root`, as `module: imports name (rule)`."""
    found = []
    graph = modules(root)
    for module, imports in graph:
        for owners, names in FORBIDDEN:
            if not module.startswith(owners):
                continue
            found += [f"{module}: imports {name} (forbidden in {', '.join(owners)})"
                      for name in names if _uses(imports, name)]
        if _uses(imports, "pyspark") and not module.startswith("spark/"):
            found.append(f"{module}: imports pyspark (only spark/ may)")
        if _uses(imports, "dagster") and not module.startswith(DAGSTER_LAYER):
            found.append(f"{module}: imports dagster (only the Dagster layer may)")
        wiring = module.startswith("defs/") and not module.endswith("__init__.py")
        if wiring and not _uses(imports, "dagster"):
            found.append(f"{module}: no dagster import (belongs in domain/ or an adapter)")
        if "/" not in module and module not in TOP_LEVEL:
            found.append(f"{module}: outside a concept folder (the top level keeps only "
                         f"{', '.join(sorted(TOP_LEVEL))})")
    return sorted(set(found))


def crowded_folders(root: Path) -> list[str]:
    """Folders of the package holding more than MAX_MODULES_PER_FOLDER modules directly."""
    found = []
    for folder in sorted({root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")}):
        count = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        if count > MAX_MODULES_PER_FOLDER:
            found.append(f"{folder.relative_to(root).as_posix()}: {count} modules")
    return found


def test_the_package_keeps_its_layers() -> None:
    assert violations(PACKAGE) == []


def test_the_walker_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "import importlib\nfrom typing import TYPE_CHECKING\nimport dagster as dg\n"
        "from ..spark import session\nfrom .frozen_model import FrozenModel\n"
        "if TYPE_CHECKING:\n    from pyspark.sql import SparkSession\n"
        "def f():\n    from pyiceberg.catalog import load_catalog\n"
        "    importlib.import_module('yaml')\n    __import__('sqlalchemy.orm')\n"
    )
    found = runtime_imports(source, "icepack_dagster.domain")
    assert "pyspark.sql" not in found
    assert {
        "importlib", "typing", "dagster", "icepack_dagster.spark", "icepack_dagster.spark.session",
        "icepack_dagster.domain.frozen_model", "pyiceberg.catalog", "yaml", "sqlalchemy.orm",
    } <= found


PLANTED = {
    "relative import of the Dagster layer in domain": (
        "domain/planted.py", "from ..defs import partitions\n",
        "domain/planted.py: imports icepack_dagster.defs (forbidden in domain/)",
    ),
    "dagster through importlib in domain": (
        "domain/planted.py", "import importlib\n\nDG = importlib.import_module('dagster')\n",
        "domain/planted.py: imports dagster (forbidden in domain/)",
    ),
    "dagster through __import__ in an adapter": (
        "spark/planted.py", "def f():\n    return __import__('dagster')\n",
        "spark/planted.py: imports dagster (forbidden in iceberg/, spark/, store/, alerting/)",
    ),
    "yaml in domain": (
        "domain/planted.py", "import yaml\n", "domain/planted.py: imports yaml (forbidden in domain/)",
    ),
    "sqlalchemy in domain": (
        "domain/planted.py", "from sqlalchemy import select\n",
        "domain/planted.py: imports sqlalchemy (forbidden in domain/)",
    ),
    "pyiceberg in domain": (
        "domain/planted.py", "from pyiceberg.table import Table\n",
        "domain/planted.py: imports pyiceberg (forbidden in domain/)",
    ),
    "the engine in domain": (
        "domain/planted.py", "from icepack_dagster.engine import Engine\n",
        "domain/planted.py: imports icepack_dagster.engine (forbidden in domain/)",
    ),
    "the configuration in domain": (
        "domain/planted.py", "from icepack_dagster.config.settings import IcepackSettings\n",
        "domain/planted.py: imports icepack_dagster.config (forbidden in domain/)",
    ),
    "an adapter in the configuration": (
        "config/planted.py", "from icepack_dagster.iceberg import catalogs\n",
        "config/planted.py: imports icepack_dagster.iceberg (forbidden in config/)",
    ),
    "pyiceberg in the configuration": (
        "config/planted.py", "import pyiceberg\n", "config/planted.py: imports pyiceberg"
        " (forbidden in config/)",
    ),
    "the engine in the alerting adapter": (
        "alerting/planted.py", "from icepack_dagster.engine import Engine\n",
        "alerting/planted.py: imports icepack_dagster.engine"
        " (forbidden in iceberg/, spark/, store/, alerting/)",
    ),
    "a loose module at the top level": (
        "helpers.py", "X = 1\n", "helpers.py: outside a concept folder (the top level keeps only "
        "__init__.py, definitions.py, exceptions.py)",
    ),
    "iceberg importing the Dagster layer": (
        "iceberg/planted.py", "from icepack_dagster.defs.partitions import table_key\n",
        "iceberg/planted.py: imports icepack_dagster.defs (forbidden in iceberg/, spark/, store/, alerting/)",
    ),
    "iceberg importing the engine, relatively": (
        "iceberg/planted.py", "from .. import engine\n",
        "iceberg/planted.py: imports icepack_dagster.engine"
        " (forbidden in iceberg/, spark/, store/, alerting/)",
    ),
    "spark importing the definitions": (
        "spark/planted.py", "import icepack_dagster.definitions\n",
        "spark/planted.py: imports icepack_dagster.definitions"
        " (forbidden in iceberg/, spark/, store/, alerting/)",
    ),
    "pyiceberg in the Dagster layer": (
        "defs/planted.py", "import dagster as dg\nfrom pyiceberg.catalog import Catalog\n",
        "defs/planted.py: imports pyiceberg (forbidden in defs/, definitions.py, component/)",
    ),
    "pyspark in the Dagster layer, inside a function": (
        "defs/maintenance/planted.py", "import dagster as dg\n\ndef f():\n    import pyspark.sql\n",
        "defs/maintenance/planted.py: imports pyspark (forbidden in defs/, definitions.py, component/)",
    ),
    "pyspark outside spark/": (
        "iceberg/planted.py", "import pyspark\n", "iceberg/planted.py: imports pyspark (only spark/ may)",
    ),
    "dagster outside the Dagster layer": (
        "engine/planted.py", "import dagster\n",
        "engine/planted.py: imports dagster (only the Dagster layer may)",
    ),
    "a module without Dagster in the Dagster layer": (
        "defs/fleet/planted.py", "from icepack_dagster.domain.reports.fleet import FleetSummary\n",
        "defs/fleet/planted.py: no dagster import (belongs in domain/ or an adapter)",
    ),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_planted_violation_is_reported(name: str, tmp_path: Path) -> None:
    module, source, expected = PLANTED[name]
    copy = tmp_path / ROOT
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(copy) == []
    (copy / module).write_text(source)
    assert expected in violations(copy)


def test_no_folder_is_crowded(tmp_path: Path) -> None:
    assert crowded_folders(PACKAGE) == []
    copy = tmp_path / ROOT
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for n in range(MAX_MODULES_PER_FOLDER + 1):
        (copy / "domain" / "table" / f"planted_{n}.py").write_text("")
    assert [folder.split(":")[0] for folder in crowded_folders(copy)] == ["domain/table"]


def environment_readers(root: Path) -> list[str]:
    """Modules other than config/settings.py that read the environment (`os.environ`, `os.getenv`)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module == "config/settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
                found.append(f"{module}:{node.lineno}")
    return found


def test_settings_is_the_only_reader_of_the_environment(tmp_path: Path) -> None:
    assert environment_readers(PACKAGE) == []
    copy = tmp_path / ROOT
    shutil.copytree(PACKAGE, copy)
    (copy / "domain" / "planted_env.py").write_text("import os\n\nHOME = os.environ.get('HOME')\n")
    assert environment_readers(copy) == ["domain/planted_env.py:3"]


CLOCK = "domain/clock.py"
_CLOCK_READS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
                ("time", "time"), ("time", "time_ns")}


def clock_readers(root: Path) -> list[str]:
    """Modules other than the clock that read the time of day (`datetime.now()`, `time.time()`, ...);
    `time.monotonic()` measures a duration and is no clock reading."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module == CLOCK:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
                if (name, node.func.attr) in _CLOCK_READS:
                    found.append(f"{module}:{node.lineno}")
    return found


def test_the_package_has_one_clock(tmp_path: Path) -> None:
    assert clock_readers(PACKAGE) == []
    copy = tmp_path / ROOT
    shutil.copytree(PACKAGE, copy)
    (copy / "store" / "planted_clock.py").write_text(
        "import time\nfrom datetime import UTC, datetime\n\nNOW = datetime.now(UTC)\nEPOCH = time.time()\n"
    )
    assert clock_readers(copy) == ["store/planted_clock.py:4", "store/planted_clock.py:5"]
