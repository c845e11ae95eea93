"""What one discovery tick changes in the Dagster partitions (one per table, the `iceberg_tables`
dynamic partitions; not the partitions of an Iceberg table), from the tables the catalogs list and the
partitions that exist: partitions to add, to remove (at most so many per tick), and the tables
still owed a first health sync.

Discovery only ever removes partitions of the catalogs it configures: a partition of any other
catalog (one taken out of the configuration, or one written by someone else) is left alone.
An outage must never delete a partition: a configured catalog that lists no managed table while
partitions of it exist (an embedded catalog whose volume is not mounted is recreated empty; a REST
catalog pointed at the wrong warehouse) is held as unavailable, and none of its partitions is removed.
Partitions after the cursor's `last_partition` were added by a tick that died before its first-sync
runs were requested; they are owed one again.
"""

from __future__ import annotations

from collections.abc import Sequence

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.exceptions import InvalidTableIdentifierError


class DagsterPartitionChanges(FrozenModel):
    """One tick's changes; `after` is the partition list once they are applied, in Dagster's order."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    unsynced: tuple[str, ...]
    after: tuple[str, ...]
    deferred_removals: int
    held: dict[str, int]  # catalog -> partitions kept because the catalog listed no managed table

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.unsynced)

    def held_text(self) -> str:
        """Why the partitions of catalogs that listed no managed table were kept."""
        return "".join(
            f"; catalog {name!r} lists no managed table but {count} partition(s) belong to it: treated as "
            "unavailable, none removed (emptied on purpose? delete those partitions with "
            "DagsterInstance.delete_dynamic_partition('iceberg_tables', key))"
            for name, count in sorted(self.held.items())
        )


def plan_dagster_partition_changes(
    tables: Sequence[str],
    partitions: Sequence[str],
    last_partition: str | None,
    catalogs: Sequence[str],
    removals_per_tick: int,
) -> DagsterPartitionChanges:
    """The changes that make `partitions` equal to `tables` (both table key texts), at most
    `removals_per_tick` removals (the daemon deletes partitions one call each: a mass drop is spread
    over ticks)."""
    current = set(partitions)
    added = [t for t in tables if t not in current]
    removed = sorted(p for p in current - set(tables) if _catalog_of(p) in (*catalogs, None))
    held = _vanished_catalogs(removed, set(tables), catalogs)
    removed = [p for p in removed if _catalog_of(p) not in held]
    deferred = max(0, len(removed) - removals_per_tick)
    gone = set(removed[:removals_per_tick])
    return DagsterPartitionChanges(
        added=tuple(added),
        removed=tuple(removed[:removals_per_tick]),
        unsynced=tuple(p for p in _added_since(partitions, last_partition) if p not in gone),
        after=(*(p for p in partitions if p not in gone), *added),
        deferred_removals=deferred,
        held=held,
    )


def _vanished_catalogs(removed: list[str], found: set[str], configured: Sequence[str]) -> dict[str, int]:
    """Configured catalogs that listed no managed table although partitions of theirs exist, with how many
    partitions each would lose: an empty listing of a whole catalog is read as an outage, not a drop."""
    listed = {parse_table_key(t).catalog for t in found}
    vanished: dict[str, int] = {}
    for partition in removed:
        catalog = _catalog_of(partition)
        if catalog is not None and catalog in configured and catalog not in listed:
            vanished[catalog] = vanished.get(catalog, 0) + 1
    return vanished


def _catalog_of(partition: str) -> str | None:
    """The catalog a partition key names; None for a key that is no table key (typed by hand into the
    Materialize dialog), which discovery removes."""
    try:
        return parse_table_key(partition).catalog
    except InvalidTableIdentifierError:
        return None


def _added_since(partitions: Sequence[str], last: str | None) -> list[str]:
    """Partitions after `last` in Dagster's order; all of them when the position is unknown (no
    cursor, or its partition is gone): a sync too many is harmless, a first sync lost is not."""
    if last is None or last not in partitions:
        return list(partitions)
    index = list(partitions).index(last)
    return list(partitions[index + 1 :])
