"""The partitions definition of a deployment: every managed Iceberg table is a partition whose key is
`TableKey.text` (`catalog.ns.table`, reversible with `parse_table_key`). The discovery sensor keeps
the set equal to the catalogs' tables. Each icepack deployment of a Dagster instance has its own
(`PlatformSettings.partitions_name`), so two deployments never see or remove each other's tables."""

from __future__ import annotations

import dagster as dg

from icepack_dagster.config.platform import DEFAULT_PARTITIONS_NAME, PlatformSettings
from icepack_dagster.domain.table.key import TableKey, parse_table_key

PARTITIONS_NAME = DEFAULT_PARTITIONS_NAME  # the default deployment's
TABLE_PARTITIONS = dg.DynamicPartitionsDefinition(name=PARTITIONS_NAME)


def tables_partitions(platform: PlatformSettings) -> dg.DynamicPartitionsDefinition:
    """The deployment's partitions definition."""
    return dg.DynamicPartitionsDefinition(name=platform.partitions_name)


def partition_key(key: TableKey) -> str:
    return key.text


def table_key(partition: str) -> TableKey:
    return parse_table_key(partition)
