"""Benchmark: what a maintenance sensor tick (fresh cursor) and a fleet refresh read to decide, at fleet
scale, from Dagster's event log (as before icepack's table facts) and from the table facts.

Every table gets one real `table_health` materialization with the codec's metadata (a warning health
with one issue) on a real instance, and the same health in the state database's table facts. Timed:
the sensor's read of every health written after a fresh cursor (event log: `new_materializations`
decoded; facts: `health_events_after`, one indexed query) and the fleet's read of every table's latest
health (event log: `latest_per_partition`, a query per 500 partitions, decoded; facts: `measured`, one
query). Both storages are SQLite, as `dagster dev` and the default state database use, in /dev/shm where
there is one (storing 10,000 events on disk takes many minutes).

    .venv/bin/python bench/decision_reads.py [--tables 10000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # noqa: E402

from icepack_dagster.defs.asset_keys import DEFAULT_NAMES  # noqa: E402
from icepack_dagster.defs.event_reads import latest_per_partition, metadata_of  # noqa: E402
from icepack_dagster.defs.materialization_codec import decode_health, health_metadata  # noqa: E402
from icepack_dagster.domain.clock import utc_now  # noqa: E402
from icepack_dagster.domain.health.model import HealthIssue, HealthState, Severity, TableHealth  # noqa: E402
from icepack_dagster.store.table_facts import Measurement, TableFactsStore  # noqa: E402


def _health(table: str) -> TableHealth:
    issue = HealthIssue(code="SMALL_FILES", severity=Severity.WARNING, metric="small_file_ratio", value=0.9,
                        threshold=0.5, message="90% of data files are small")
    return TableHealth(table=table, state=HealthState.WARNING, issues=(issue,))


def _timed(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=10_000)
    count = parser.parse_args().tables
    tables = [f"lake.bench.t{i:06d}" for i in range(count)]
    # Storing the events is set-up, not what is measured: in memory (tmpfs) it skips the disk's syncs.
    memory = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with (
        tempfile.TemporaryDirectory(dir=memory) as home,
        dg.instance_for_test(temp_dir=f"{home}") as instance,
    ):
        facts = TableFactsStore(f"sqlite:///{home}/state.db", "icepack")
        instance.add_dynamic_partitions("iceberg_tables", tables)
        loading, _ = _timed(lambda: [
            instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    DEFAULT_NAMES.table_health, partition=t, metadata=health_metadata(_health(t))
                )
            )
            for t in tables
        ])
        facts.record_measurements([Measurement(t, None, None, _health(t)) for t in tables], utc_now())

        def events_tick() -> int:
            records = instance.fetch_materializations(  # what the sensor read before the table facts
                dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.table_health, after_storage_id=0),
                limit=count,
                ascending=True,
            ).records
            return sum(decode_health(metadata_of(r)) is not None for r in records)

        def events_fleet() -> int:
            records = latest_per_partition(instance, DEFAULT_NAMES.table_health, tables)
            return sum(decode_health(metadata_of(r)) is not None for r in records.values())

        rows = [
            ("sensor tick read, event log", events_tick),
            ("sensor tick read, table facts", lambda: len(facts.health_events_after(0, count))),
            ("fleet read, event log", events_fleet),
            ("fleet read, table facts", lambda: len(facts.measured(tables))),
        ]
        print(f"{count} tables ({loading:.0f} s to store their health events)")  # noqa: T201
        for name, work in rows:
            seconds, read = _timed(work)
            assert read == count, (name, read)
            print(f"{name}: {seconds:.2f} s")  # noqa: T201


if __name__ == "__main__":
    main()
