"""Contract: an action on a table whose schema holds a type the Spark cannot read is refused, naming the
table, the column and its type, the Spark and its Iceberg runtime, and what would run it: `variant` from
Spark 4.0 with Iceberg 1.10.0, while `geometry`, `geography`, `time` and the nanosecond timestamps are
read by no Spark runtime of Iceberg up to 1.11.0; `unknown` and the other types are read. Pure."""

from __future__ import annotations

import pytest

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction as A
from icepack_dagster.domain.actions.readable_types import unreadable_type_refusal

READ = {"long": "id", "string": "payload", "decimal": "amount", "unknown": "dropped", "timestamptz": "at"}


def test_a_table_of_types_spark_reads_is_never_refused() -> None:
    for spark, runtime in [("3.5.7", "1.11.0"), (None, None)]:
        assert unreadable_type_refusal("lake.ns.t", A.REWRITE_DATA_FILES, READ, spark, runtime) is None


@pytest.mark.parametrize("type_name", ["timestamp_ns", "timestamptz_ns", "time", "geometry", "geography"])
def test_a_type_no_spark_runtime_reads_is_refused_on_every_spark(type_name: str) -> None:
    types = {**READ, type_name: "events.x"}
    for spark, runtime in [("3.5.7", "1.11.0"), ("4.1.0", "1.11.0"), (None, None)]:
        refusal = unreadable_type_refusal("lake.ns.t", A.EXPIRE_SNAPSHOTS, types, spark, runtime)
        assert refusal is not None
        assert refusal.startswith(
            f"table lake.ns.t: expire_snapshots refused: column events.x is of type {type_name}, which "
            f"this Spark (Spark {spark or 'of unknown version'}, Iceberg runtime "
            f"{runtime or 'that cannot be told'}) cannot read: "
        )
        assert "Spark 4.0" not in refusal and "icepack leaves it untouched" in refusal


def test_variant_is_read_from_spark_4_with_iceberg_1_10() -> None:
    types = {**READ, "variant": "payload_v"}
    refusal = unreadable_type_refusal("lake.ns.t", A.REWRITE_DATA_FILES, types, "3.5.7", "1.11.0")
    assert refusal == (
        "table lake.ns.t: rewrite_data_files refused: column payload_v is of type variant, which this Spark "
        "(Spark 3.5.7, Iceberg runtime 1.11.0) cannot read: Spark reads it from 4.0, with Iceberg 1.10.0 or "
        "later; run its maintenance on a Spark 4.0.0 or later (a Spark Connect server or cluster) whose "
        "Iceberg runtime is 1.10.0 or later"
    )
    assert unreadable_type_refusal("lake.ns.t", A.REWRITE_DATA_FILES, types, "4.0.1", "1.9.2") is not None
    assert unreadable_type_refusal("lake.ns.t", A.REWRITE_DATA_FILES, types, "4.0.1", None) is not None
    assert unreadable_type_refusal("lake.ns.t", A.REWRITE_DATA_FILES, types, "4.0.1", "1.10.0") is None
