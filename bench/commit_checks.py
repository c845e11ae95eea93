"""Benchmark: what the checks after every maintenance commit cost per table (`engine/commit_verification.py`).

The checks read metadata only. Per action they load the table from its catalog and read its metadata
file (`commit_facts`), then judge the change (`action_commits`, `violations`); one more read before the
first action. Timed here exactly as the verifier runs them, on the fleet benchmark's small tables (8
one-row appends, `--appends` to change it) in the embedded SQLite catalog, for a maintenance of
`--actions` actions (3: compaction, manifest rewrite, expiry, what such a table gets). No Spark: the
checks run none. A manifest rewrite also reads the manifests it changed, and orphan removal every
manifest; neither is included (both are measured by status collection's benchmark).

    .venv/bin/python bench/commit_checks.py [--tables N] [--actions N] [--appends N]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _tables  # noqa: E402
from bench._fixtures import Bench, arguments, best_of, machine, table  # noqa: E402
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction  # noqa: E402
from icepack_dagster.domain.outcomes.commit_invariants import action_commits, violations  # noqa: E402
from icepack_dagster.iceberg.catalogs import load_table  # noqa: E402
from icepack_dagster.iceberg.commits.facts import commit_facts  # noqa: E402


def main() -> None:
    args = arguments(__doc__ or "", lambda p: (
        p.add_argument("--tables", type=int, default=40),
        p.add_argument("--actions", type=int, default=3),
        p.add_argument("--appends", type=int, default=8),
    ))
    bench = Bench(args.workdir)
    keys = _tables.fleet(bench, 5 if args.quick else args.tables, prefix="checks", appends=args.appends)
    catalog = bench.catalogs.get("lake")
    started_ms = int(time.time() * 1000)

    def checks_of_one_maintenance() -> None:
        for key in keys:
            before = commit_facts(load_table(catalog, key))
            assert before is not None
            for _ in range(args.actions):
                after = commit_facts(load_table(catalog, key))
                assert after is not None
                commits = action_commits(before, after, started_ms)
                violations(MaintenanceAction.REWRITE_DATA_FILES, before, after, commits, {}, {}, started_ms)
                before = after

    best_of(1, checks_of_one_maintenance)  # warm: imports, the catalog's connection
    wall, cpu, _ = best_of(3, checks_of_one_maintenance)
    per_table = wall / len(keys)
    table(
        f"commit checks, {len(keys)} tables of {args.appends} appends, {args.actions} actions each "
        f"({machine()})",
        ["tables", "wall s", "CPU s", "per table ms", "per action ms"],
        [[len(keys), f"{wall:.3f}", f"{cpu:.3f}", f"{per_table * 1000:.1f}",
          f"{per_table * 1000 / (args.actions + 1):.1f}"]],
    )


if __name__ == "__main__":
    main()
