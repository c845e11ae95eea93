"""docs/ARCHITECTURE.md matches the tree. Every module path the doc names exists: in backticks
anywhere (`domain/table/key.py`, `icepack_dagster/...`, `tests/...`) or in its flow diagram, and every
name in the first column of its module table, where a bare name (`partition_filter.py`) is in the folder
of the row's first path. And every module of the package (each `.py` file under icepack_dagster except
`__init__.py`) is named in that column. The check proves itself: a row naming a module that does not
exist, and a module the table does not name, each planted in a copy of the repository, are reported.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = Path("docs") / "ARCHITECTURE.md"
PACKAGE = "icepack_dagster"
# A path with at least one folder, naming a Python module or a folder: `store/migrations/`, `cli/app.py`.
_PATH = re.compile(r"^[\w.]+(?:/[\w.]+)*(?:\.py|/)$")
_DIAGRAM_PATH = re.compile(r"(?<![\w/.])((?:[a-z_]+/)+[a-z_0-9]+\.py)\b")
_TABLE_HEADER = re.compile(r"^\|\s*module\s*\|")


def _exists(root: Path, path: str) -> bool:
    """A path the doc names: from the package (`domain/x.py`) or from the repository (`tests/x.py`,
    `icepack_dagster/x.py`)."""
    return (root / PACKAGE / path).exists() or (root / path).exists()


def _module_column(doc: str) -> list[list[str]]:
    """The backticked names of each row's first cell in the module table."""
    rows, in_table = [], False
    for line in doc.splitlines():
        if _TABLE_HEADER.match(line):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table and not line.startswith("|---"):
            first_cell = line.split("|")[1]
            rows.append(re.findall(r"`([^`]+)`", first_cell))
    return rows


def _named_outside_the_table(doc: str) -> set[str]:
    """Module and folder paths the doc names in backticks anywhere, or in its flow diagram."""
    named = {name for name in re.findall(r"`([^`\s]+)`", doc) if "/" in name and _PATH.match(name)}
    for block in re.findall(r"```\n(.*?)```", doc, flags=re.S):
        named |= set(_DIAGRAM_PATH.findall(block))
    return named


def architecture_doc_problems(root: Path) -> list[str]:
    """What docs/ARCHITECTURE.md under `root` says about the tree that is not so, and the package's
    modules it leaves out."""
    doc = (root / DOC).read_text()
    rows = _module_column(doc)
    if not rows:
        return ["the doc has no module table (a table whose first column is `module`)"]
    problems, in_table = [], set()
    for names in rows:
        folder = names[0].rpartition("/")[0] if names else ""
        for name in names:
            path = name if "/" in name or not folder else f"{folder}/{name}"
            if not _exists(root, path):
                problems.append(f"the module table names `{path}`, which does not exist")
            in_table.add(path.removeprefix(f"{PACKAGE}/"))
    for name in sorted(_named_outside_the_table(doc) - in_table):
        if not _exists(root, name):
            problems.append(f"the doc names `{name}`, which does not exist")
    package = root / PACKAGE
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if path.name != "__init__.py" and "__pycache__" not in path.parts and module not in in_table:
            problems.append(f"`{module}` is a module of the package the module table does not name")
    return problems


def _copy(tmp_path: Path) -> Path:
    """The repository's files, copied (the doc also names tests and deploy files)."""
    copy = tmp_path / "repo"
    ignored = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".*_cache", ".hypothesis")
    shutil.copytree(REPO, copy, ignore=ignored)
    return copy


def test_the_architecture_doc_matches_the_tree() -> None:
    assert architecture_doc_problems(REPO) == []


def test_a_row_naming_a_module_that_does_not_exist_is_reported(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    doc = (copy / DOC).read_text()
    separator = next(line for line in doc.splitlines() if line.startswith("|---"))
    planted = f"{separator}\n| `definitions.py`, `domain/gone/module.py`, `undone.py` | modules that went |"
    (copy / DOC).write_text(doc.replace(separator, planted, 1))

    assert architecture_doc_problems(copy) == [
        "the module table names `domain/gone/module.py`, which does not exist",
        "the module table names `undone.py`, which does not exist",
    ]


def test_a_path_in_the_prose_that_does_not_exist_is_reported(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    with (copy / DOC).open("a") as doc:
        doc.write("\nThe old home of the settings was `icepack_dagster/gone/settings.py`.\n")

    assert architecture_doc_problems(copy) == [
        "the doc names `icepack_dagster/gone/settings.py`, which does not exist"
    ]


def test_a_module_the_table_does_not_name_is_reported(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (copy / PACKAGE / "cli" / "undocumented.py").write_text('"""A module nobody documented."""\n')

    assert architecture_doc_problems(copy) == [
        "`cli/undocumented.py` is a module of the package the module table does not name"
    ]
