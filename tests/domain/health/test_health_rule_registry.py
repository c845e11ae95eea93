"""Contract: a health rule is its check (here its own module beside `judging.py`, as
`stale_statistics.py` is), its lines in `domain/health/judging.py` (`ISSUE_CODES`, `_CHECKS`) and its
levels in `domain/health/thresholds.py`, as docs/ARCHITECTURE.md says. A rule planted in a copy of the
package that way, and nowhere else, is judged on every table: its issue appears, with its code and
level, and sets the table's state; settings accept its threshold by name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "icepack_dagster"

PLANTED_RULE = '''
"""WIDE_TABLE, planted by a test: too many partitions for one table."""

from icepack_dagster.domain.health.model import HealthIssue, Severity
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.status import TableStatus

WIDE_TABLE = "WIDE_TABLE"


def wide_table(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    if s.partition_count < t.partition_count_warning:
        return None
    return HealthIssue(
        code=WIDE_TABLE, severity=Severity.WARNING, metric="partition_count", value=s.partition_count,
        threshold=t.partition_count_warning, message=f"{s.partition_count} partitions",
    )
'''
USE_IT = '''
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.health.judging import assess_health
from tests.factories import make_status

thresholds = IcepackSettings(thresholds={"partition_count_warning": 10}).thresholds
for partitions in (9, 10):
    health = assess_health(make_status(partition_count=partitions), thresholds)
    print(health.state.value, [(i.code, i.severity.value, i.threshold) for i in health.issues])
'''


def test_a_new_health_rule_is_its_check_and_its_lines_in_judging_and_thresholds(tmp_path: Path) -> None:
    copy = tmp_path / "icepack_dagster"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    health = copy / "domain" / "health"
    (health / "wide_table.py").write_text(PLANTED_RULE)
    edits = {
        health / "judging.py": (
            ("from icepack_dagster.domain.health.thresholds import HealthThresholds\n",
             "from icepack_dagster.domain.health.thresholds import HealthThresholds\n"
             "from icepack_dagster.domain.health.wide_table import WIDE_TABLE, wide_table\n"),
            ("    STALE_STATISTICS,\n)", "    STALE_STATISTICS,\n    WIDE_TABLE,\n)"),
            ("    stale_statistics,\n)", "    stale_statistics, wide_table,\n)"),
        ),
        health / "thresholds.py": (
            ("    @model_validator(mode=\"after\")",
             "    partition_count_warning: int = Field(default=100_000, ge=1)\n\n"
             "    @model_validator(mode=\"after\")"),
        ),
    }
    for path, replacements in edits.items():
        text = path.read_text()
        for old, new in replacements:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        path.write_text(text)
    changed = [
        p.relative_to(copy).as_posix() for p in sorted(copy.rglob("*.py"))
        if not (PACKAGE / p.relative_to(copy)).exists()
        or (PACKAGE / p.relative_to(copy)).read_bytes() != p.read_bytes()
    ]
    assert changed == [f"domain/health/{name}.py" for name in ("judging", "thresholds", "wide_table")]

    repo = PACKAGE.parent
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(USE_IT)],
        cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{repo}", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    below, at = ran.stdout.splitlines()
    assert "WIDE_TABLE" not in below
    assert at.startswith("warning") and "('WIDE_TABLE', 'warning', 10.0)" in at
