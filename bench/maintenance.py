"""Benchmark 3: what the platform adds to the Spark work it orders, and what compaction pays back.

On identical copies of a small-files table (same rows, same file layout, written the same way):

1. `Engine.maintain` (status, recommendation, a session per table, the CALL, status after, history)
   against a plain PySpark script running the very same CALL statement: Spark work is the JVM's CPU
   time (local mode: driver and executors are one JVM), the platform's own work is this Python
   process's CPU time, and the fixed overhead is the difference in wall time.
2. Compaction (`rewrite_data_files`) against a plain read-and-rewrite of the same rows
   (`spark.table(t).writeTo(new).create()`).
3. A scan query before and after compaction.

Every table's contents are checked unchanged (row count + checksum) after each step.

    .venv/bin/python bench/maintenance.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._fixtures import NAMESPACE, Bench, arguments, machine, ratio, table  # noqa: E402
from bench._tables import key  # noqa: E402
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction  # noqa: E402
from icepack_dagster.engine import Engine  # noqa: E402
from icepack_dagster.spark.runner import MaintenanceRunner  # noqa: E402
from tests.tables_testkit import table_fingerprint  # noqa: E402

QUERY = "SELECT count(*), sum(length(s)), max(id) FROM {table} WHERE id % 7 = 3"


class Meter:
    """Wall time, this Python process's CPU time and the Spark JVM's CPU time of one piece of work."""

    def __init__(self, spark: Any) -> None:
        self.jvm = spark.sparkContext._jvm
        self.jvm_pid = int(self.jvm.ProcessHandle.current().pid())
        self.ticks = os.sysconf("SC_CLK_TCK")

    def jvm_cpu(self) -> float:
        fields = Path(f"/proc/{self.jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.ticks  # utime + stime

    def measure(self, work: Any) -> dict[str, Any]:
        self.jvm.System.gc()  # collect what earlier work left, so each run pays only for its own garbage
        wall, cpu, jvm = time.perf_counter(), time.process_time(), self.jvm_cpu()
        result = work()
        return {
            "wall": time.perf_counter() - wall,
            "python": time.process_time() - cpu,
            "spark": self.jvm_cpu() - jvm,
            "result": result,
        }


def small_files_table(bench: Bench, name: str, files: int, rows: int) -> str:
    """The same rows in the same `files` files every time (deterministic, one task per file)."""
    qualified = f"lake.{NAMESPACE}.{name}"
    bench.spark.sql(f"DROP TABLE IF EXISTS {qualified} PURGE")
    bench.spark.sql(
        f"CREATE TABLE {qualified} (id bigint, s string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')"
    )
    bench.spark.sql(
        f"INSERT INTO {qualified} SELECT id, sha2(CAST(id AS STRING), 256) FROM range(0, {rows}, 1, {files})"
    )
    return qualified


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    bench = Bench(args.workdir)
    files, rows, pairs = (30, 30_000, 1) if args.quick else (400, 2_000_000, 4)
    print(f"Maintenance benchmark ({'quick' if args.quick else 'full'}); {machine()}")
    spark = bench.spark
    meter = Meter(spark)
    engine = Engine(bench.settings, catalogs=bench.catalogs, spark_provider=lambda: spark)
    only = [MaintenanceAction.REWRITE_DATA_FILES]

    run = f"{int(time.time())}"  # maintenance history remembers tables: new names every run
    warm_name = f"maint_warmup_{run}"
    warm = small_files_table(bench, warm_name, files, rows)  # the JVM's JIT warms up on this one
    expected = table_fingerprint(spark, warm)
    warmed = engine.maintain(key(warm_name), only=only).results
    assert [r.status for r in warmed] == ["succeeded"], warmed
    template_call = warmed[0].statements[-1]  # the CALL itself, after the session setup statements
    made = [warm]

    platform_rows: list[list[Any]] = []
    engine_runs, plain_runs, compacted = [], [], ""
    for pair in range(pairs):
        for order, kind in enumerate(("engine", "plain") if pair % 2 == 0 else ("plain", "engine")):
            name = f"maint_{kind}_{pair}_{order}_{run}"
            qualified = small_files_table(bench, name, files, rows)
            made.append(qualified)
            if kind == "engine":
                measured = meter.measure(lambda n=name: engine.maintain(key(n), only=only))
                result = measured["result"].results[0]
                assert result.status == "succeeded", result
                measured["outside"] = measured["wall"] - result.duration_seconds  # not in Spark statements
                engine_runs.append(measured)
            else:
                call = template_call.replace(warm_name, name)
                measured = meter.measure(lambda c=call: spark.sql(c).collect())
                plain_runs.append(measured)
                compacted = qualified
            assert table_fingerprint(spark, qualified) == expected, f"{qualified} contents changed"
            files_after = spark.sql(f"SELECT count(*) FROM {qualified}.files").collect()[0][0]
            platform_rows.append(
                [kind, name, measured["wall"], measured["spark"], measured["python"], files_after]
            )

    def median(runs: list[dict[str, Any]], field: str) -> float:
        values = sorted(r[field] for r in runs)
        return (values[(len(values) - 1) // 2] + values[len(values) // 2]) / 2

    def spread(runs: list[dict[str, Any]], field: str) -> str:
        values = [r[field] for r in runs]
        return f"{min(values):.2f}-{max(values):.2f}"

    runner = MaintenanceRunner(spark, "lake")

    def session_setup() -> None:
        assert runner.run(key(warm_name), []) == []  # no action: the table's session opened and closed

    setups = sorted((meter.measure(session_setup) for _ in range(7)), key=lambda r: r["spark"])
    setup = setups[len(setups) // 2]  # the median: a shared machine makes single runs noisy
    engine_spark, plain_spark = median(engine_runs, "spark"), median(plain_runs, "spark")
    table(
        f"1. Compacting {files} small files ({rows:,} rows): Engine.maintain vs the same CALL in plain "
        "PySpark",
        ["run", "table", "wall s", "Spark (JVM) cpu s", "Python cpu s", "files after"],
        platform_rows,
    )
    print(
        f"Spark work (JVM CPU, median): engine {engine_spark:.2f} s vs plain {plain_spark:.2f} s "
        f"({100 * (engine_spark - plain_spark) / plain_spark:+.1f}%); identical plain runs spread "
        f"{spread(plain_runs, 'spark')} s, engine runs {spread(engine_runs, 'spark')} s"
    )
    print(
        f"fixed overhead per table: {median(engine_runs, 'outside'):.2f} s wall outside the Spark "
        f"statements (status before and after, recommendation, history), "
        f"{median(engine_runs, 'python'):.3f} s Python CPU"
    )
    print(
        f"the engine's own Spark work per table (new session, SET, table check, catalog close; median of "
        f"7): {setup['spark']:.3f} s JVM CPU, {setup['wall']:.3f} s wall = "
        f"{100 * setup['spark'] / plain_spark:.1f}% of this compaction's Spark work"
    )
    print(f"statement: {template_call}")

    source = small_files_table(bench, f"maint_rewrite_src_{run}", files, rows)
    before_scan = _scan(spark, source)
    copy = f"lake.{NAMESPACE}.maint_rewrite_copy_{run}"
    made += [source, copy]
    rewrite = meter.measure(lambda: spark.table(source).writeTo(copy).using("iceberg").create())
    assert table_fingerprint(spark, copy) == expected
    compaction = plain_runs[0]
    after_scan = _scan(spark, compacted)
    table(
        "2. Compaction vs a plain read-and-rewrite of the same rows; 3. a scan before and after",
        ["work", "wall s", "Spark (JVM) cpu s", "vs read-and-rewrite (wall)"],
        [
            ["rewrite_data_files (plain CALL)", compaction["wall"], compaction["spark"],
             ratio(compaction["wall"], rewrite["wall"])],
            ["read-and-rewrite into a new table", rewrite["wall"], rewrite["spark"], "1.00x"],
            [f"scan, {files} small files (best of 3)", before_scan, "-", "-"],
            ["scan, compacted (best of 3)", after_scan, "-", f"{before_scan / after_scan:.2f}x faster"],
        ],
    )
    for qualified in made:
        spark.sql(f"DROP TABLE IF EXISTS {qualified} PURGE")


def _scan(spark: Any, qualified: str) -> float:
    query = QUERY.format(table=qualified)
    spark.sql(query).collect()
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        spark.sql(query).collect()
        timings.append(time.perf_counter() - started)
    return min(timings)


if __name__ == "__main__":
    main()
