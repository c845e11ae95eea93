"""The Iceberg types a Spark cannot read, and the refusal of any action on a table whose schema holds
one.

Spark opens an Iceberg table by converting its whole schema to Spark types; a type with no Spark
counterpart makes every statement on the table fail, each maintenance procedure included, and not
always before it commits: on Spark 3.5 with Iceberg 1.11.0, `rewrite_manifests` on a table with a
`variant` column committed a new snapshot and then failed with `Unsupported type: variant`. What each
type needs was found on that runtime and in Iceberg's `TypeToSparkType` of each Spark module (1.11.0):
`variant` is read from Spark 4.0 with Iceberg 1.10.0 (Iceberg's first Spark 4.0 runtime); no Spark
runtime of Iceberg up to 1.11.0 reads `geometry` or `geography`; Spark has no type for `time`,
`timestamp_ns` or `timestamptz_ns`. `unknown` is read (as Spark's `void`), and maintained.

The table's types come from its status (`TableStatus.schema_types`, read from metadata by PyIceberg),
so the refusal comes before any statement on the table.
"""

from __future__ import annotations

from collections.abc import Mapping

from icepack_dagster.domain.actions.definition import IcebergVersion
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.runtime_requirements import parse_version, shown
from icepack_dagster.domain.frozen_model import FrozenModel

_NO_SPARK_TYPE = "Spark has no type for it, so no Spark runtime of Iceberg (up to 1.11.0) reads it"
_NO_SPARK_RUNTIME = "no Spark runtime of Iceberg up to 1.11.0 reads it"


class SparkReadable(FrozenModel):
    """Which Spark, with which Iceberg runtime, reads a type; both None when none icepack knows does."""

    spark: IcebergVersion | None = None
    iceberg: IcebergVersion | None = None
    why: str


UNREADABLE_BELOW: Mapping[str, SparkReadable] = {
    "variant": SparkReadable(
        spark=(4, 0, 0), iceberg=(1, 10, 0), why="Spark reads it from 4.0, with Iceberg 1.10.0 or later"
    ),
    "geometry": SparkReadable(why=_NO_SPARK_RUNTIME),
    "geography": SparkReadable(why=_NO_SPARK_RUNTIME),
    "time": SparkReadable(why=_NO_SPARK_TYPE),
    "timestamp_ns": SparkReadable(why=_NO_SPARK_TYPE),
    "timestamptz_ns": SparkReadable(why=_NO_SPARK_TYPE),
}


def _reads(need: SparkReadable, spark: str | None, runtime: str | None) -> bool:
    if need.spark is None or need.iceberg is None:
        return False
    spark_version, iceberg_version = parse_version(spark), parse_version(runtime)
    if spark_version is None or iceberg_version is None:
        return False
    return spark_version >= need.spark and iceberg_version >= need.iceberg


def _next_step(need: SparkReadable) -> str:
    if need.spark is None or need.iceberg is None:
        return "maintain this table with an engine that reads the type; icepack leaves it untouched"
    return (
        f"run its maintenance on a Spark {shown(need.spark)} or later (a Spark Connect server or cluster) "
        f"whose Iceberg runtime is {shown(need.iceberg)} or later"
    )


def unreadable_type_refusal(
    table: str,
    action: MaintenanceAction,
    schema_types: Mapping[str, str],
    spark: str | None,
    runtime: str | None,
) -> str | None:
    """Why `action` must not run on a table whose schema holds a type this Spark cannot read, naming the
    table, the column and its type, the Spark and its Iceberg runtime, and what would run it; None when
    the Spark reads every type. `schema_types` maps each type name to the first column holding it."""
    for type_name, column in sorted(schema_types.items()):
        need = UNREADABLE_BELOW.get(type_name)
        if need is None or _reads(need, spark, runtime):
            continue
        return (
            f"table {table}: {action} refused: column {column} is of type {type_name}, which this Spark "
            f"(Spark {spark or 'of unknown version'}, Iceberg runtime {runtime or 'that cannot be told'}) "
            f"cannot read: {need.why}; {_next_step(need)}"
        )
    return None
