"""The one partitions definition: every managed Iceberg table is a partition whose key is
`TableKey.text` (`catalog.ns.table`, reversible with `parse_table_key`). The discovery sensor keeps
the set equal to the catalogs' tables."""

from __future__ import annotations

import dagster as dg

from icepack_dagster.domain.table.key import TableKey, parse_table_key

PARTITIONS_NAME = "iceberg_tables"
TABLE_PARTITIONS = dg.DynamicPartitionsDefinition(name=PARTITIONS_NAME)


def partition_key(key: TableKey) -> str:
    return key.text


def table_key(partition: str) -> TableKey:
    return parse_table_key(partition)
