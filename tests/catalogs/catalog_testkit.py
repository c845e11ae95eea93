"""Tables on any catalog (REST, Glue, SQL over S3) for the catalog suite, written through PyIceberg so
the catalog's own client and FileIO write them, and the checks every test in this folder repeats."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.table.key import TableKey
from tests.safety.safety_testkit import SCHEMA
from tests.tables_testkit import table_fingerprint

EVERY_ACTION = list(MaintenanceAction)
# Every action has work: small files, a short snapshot retention, merge-on-read deletes.
EAGER_MOR = {
    "format-version": "2",
    "icepack.snapshot.max-age-hours": "0",
    "icepack.snapshot.retain-last": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def rows(start: int, end: int) -> pa.Table:
    ids = list(range(start, end))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([0] * len(ids), pa.int32()),
            "payload": pa.array([f"row-{i}" for i in ids]),
        }
    )


def make_table(
    catalog: Catalog,
    key: TableKey,
    commits: int,
    properties: dict[str, str] | None = None,
    location: str | None = None,
) -> Any:
    """An unpartitioned table with `commits` appends of 10 rows each (one small file per commit)."""
    catalog.create_namespace_if_not_exists(key.namespace)
    extra = {"location": location} if location else {}
    table = catalog.create_table(
        key.identifier, SCHEMA, properties=properties or {"format-version": "2"}, **extra
    )
    for start in range(0, 10 * commits, 10):
        table.append(rows(start, start + 10))
    return catalog.load_table(key.identifier)


def secrets_in(text: str, secrets: tuple[str, ...]) -> list[str]:
    return [secret for secret in secrets if secret in text]


def contents_by_version(spark: Any, qualified: str) -> dict[str, tuple[int, str]]:
    """The contents fingerprint of every snapshot, branch and tag of the table named `qualified`."""
    versions = [str(r[0]) for r in spark.sql(f"SELECT snapshot_id FROM {qualified}.snapshots").collect()]
    versions += [f"'{r[0]}'" for r in spark.sql(f"SELECT name FROM {qualified}.refs").collect()]
    return {version: table_fingerprint(spark, f"{qualified} VERSION AS OF {version}") for version in versions}


def kept_versions(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> bool:
    """Every branch and tag, and every snapshot still present after maintenance, reads as before;
    expired snapshots are gone by design, so only the surviving ones are compared."""
    refs = {v for v in before if v.startswith("'")}
    return refs <= set(after) and all(after[v] == before[v] for v in after if v in before)
