"""Contract: `plan_dagster_partition_changes` makes the partitions equal to the listed tables, in one
tick or spread over ticks for a mass drop, and never removes a partition of a catalog it does not
configure; a configured catalog that lists no managed table keeps its partitions (an outage is never a
drop); partitions after the cursor's last one are owed a first sync, and every partition is when the
cursor's position is unknown."""

from __future__ import annotations

from icepack_dagster.domain.decisions.dagster_partition_changes import plan_dagster_partition_changes


def test_new_and_dropped_tables_are_added_and_removed() -> None:
    changes = plan_dagster_partition_changes(
        ["lake.a.t1", "lake.a.t3"], ["lake.a.t1", "lake.a.t2"], "lake.a.t2", ["lake"], 100
    )
    assert changes.added == ("lake.a.t3",) and changes.removed == ("lake.a.t2",)
    assert changes.after == ("lake.a.t1", "lake.a.t3") and changes.unsynced == ()
    assert changes.any and changes.deferred_removals == 0 and changes.held == {}


def test_nothing_to_change_is_said_so() -> None:
    changes = plan_dagster_partition_changes(["lake.a.t1"], ["lake.a.t1"], "lake.a.t1", ["lake"], 100)
    assert not changes.any and changes.after == ("lake.a.t1",)


def test_a_mass_drop_is_spread_over_ticks() -> None:
    partitions = [f"lake.a.t{n}" for n in range(10)]
    changes = plan_dagster_partition_changes(["lake.a.t0"], partitions, "lake.a.t9", ["lake"], 4)
    assert changes.removed == ("lake.a.t1", "lake.a.t2", "lake.a.t3", "lake.a.t4")
    assert changes.deferred_removals == 5
    assert len(changes.after) == 6


def test_a_catalog_listing_no_managed_table_keeps_its_partitions() -> None:
    partitions = ["lake.a.t1", "pg.b.t1", "pg.b.t2"]
    changes = plan_dagster_partition_changes(["lake.a.t1"], partitions, "pg.b.t2", ["lake", "pg"], 100)
    assert changes.removed == () and changes.held == {"pg": 2} and not changes.any
    assert "catalog 'pg' lists no managed table but 2 partition(s)" in changes.held_text()


def test_partitions_of_a_catalog_it_does_not_configure_are_never_removed() -> None:
    changes = plan_dagster_partition_changes(["lake.a.t1"], ["lake.a.t1", "other.b.t1"], None, ["lake"], 100)
    assert changes.removed == () and changes.held == {}
    assert changes.after == ("lake.a.t1", "other.b.t1")


def test_a_key_that_is_no_table_key_is_removed() -> None:
    changes = plan_dagster_partition_changes(["lake.a.t1"], ["lake.a.t1", "typo"], None, ["lake"], 100)
    assert changes.removed == ("typo",)


def test_partitions_after_the_cursor_are_owed_a_first_sync() -> None:
    partitions = ["lake.a.t1", "lake.a.t2", "lake.a.t3"]
    def unsynced(last: str | None) -> tuple[str, ...]:
        return plan_dagster_partition_changes(partitions, partitions, last, ["lake"], 100).unsynced

    assert unsynced("lake.a.t1") == ("lake.a.t2", "lake.a.t3")
    assert unsynced(None) == tuple(partitions)
    assert unsynced("lake.a.gone") == tuple(partitions)
