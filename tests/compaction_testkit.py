"""Daily-partitioned tables written by Spark for the compaction planner's tests: `files_per_day` inserts,
each writing one small file into every day's partition, optionally after an earlier partition spec."""

from __future__ import annotations

from typing import Any

from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey

FIRST_DAY = "2026-11-01"


def insert_days(
    spark: Any, qualified: str, start: int, rows: int, days: int, first_day: str = FIRST_DAY
) -> None:
    """One insert of `rows` rows spread over `days` days from `first_day`: one file per day touched."""
    spark.sql(
        f"INSERT INTO {qualified} SELECT id, TIMESTAMP '{first_day} 06:00:00+00:00' + "
        f"make_interval(0, 0, 0, int(id % {days})), concat('row-', string(id)) "
        f"FROM range({start}, {start + rows}, 1, 1)"
    )


def daily_table(
    spark: Any,
    namespace: str,
    name: str,
    days: int,
    files_per_day: int,
    *,
    earlier_spec_files: int = 0,
    rows_per_file: int = 20,
    catalog: str = "lake",
) -> TableKey:
    """A v2 table partitioned by days(ts). With `earlier_spec_files`, it is first partitioned by
    months(ts) and written that many times, then evolved to days(ts). In `catalog` ("lake", the
    embedded SQLite catalog, or "pg", the PostgreSQL-backed one), whose namespace Spark creates."""
    key = TableKey(catalog=catalog, namespace=(namespace,), name=name)
    qualified = qualified_table(catalog, key)
    if catalog != "lake":  # the `namespace` fixture creates it in the embedded catalog only
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.`{namespace}`")
    first = "months(ts)" if earlier_spec_files else "days(ts)"
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, ts timestamp, payload string) USING iceberg "
        f"PARTITIONED BY ({first}) TBLPROPERTIES ('format-version'='2')"
    )
    start = 0
    for _ in range(earlier_spec_files):
        insert_days(spark, qualified, start, rows_per_file * days, days)
        start += rows_per_file * days
    if earlier_spec_files:
        spark.sql(f"ALTER TABLE {qualified} REPLACE PARTITION FIELD months(ts) WITH days(ts)")
    for _ in range(files_per_day):
        insert_days(spark, qualified, start, rows_per_file * days, days)
        start += rows_per_file * days
    return key


def files_by_partition(spark: Any, key: TableKey) -> dict[str, set[str]]:
    """Live data file paths per partition (Spark's `files` metadata table, independent of icepack)."""
    rows = spark.sql(
        f"SELECT string(partition) AS p, spec_id, file_path FROM {qualified_table(key.catalog, key)}.files"
    ).collect()
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(f"{row['spec_id']}:{row['p']}", set()).add(row["file_path"])
    return found
