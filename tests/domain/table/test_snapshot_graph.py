"""Contract: `expired_by_iceberg` decides like Iceberg's RemoveSnapshots: each branch keeps its own
min-snapshots-to-keep (else retain_last) and every ancestor at or after its own age cutoff (else
older_than), walking back only through snapshots still in the metadata; tags keep their snapshot; a
ref older than its max-ref-age (else the table's) is dropped, main never; a snapshot no ref reaches is
kept only while younger than older_than. Real tables: tests/engine/test_expiry_prediction.py."""

from __future__ import annotations

from icepack_dagster.domain.table.snapshot_graph import RefFacts, SnapshotGraph, expired_by_iceberg

NOW = 1_000_000
FOREVER = 2**63 - 1


def chain(*ids: int, start: int = 0) -> tuple[tuple[int, int | None, int], ...]:
    """Snapshots each the parent of the next, committed 10 ms apart from `start`."""
    return tuple((i, ids[n - 1] if n else None, start + 10 * n) for n, i in enumerate(ids))


def main(head: int, **own: int) -> RefFacts:
    return RefFacts(name="main", kind="branch", snapshot_id=head, **own)


def test_main_keeps_retain_last_then_stops_at_the_first_old_snapshot() -> None:
    graph = SnapshotGraph(snapshots=chain(1, 2, 3, 4, 5), refs=(main(5),))
    assert expired_by_iceberg(graph, NOW, NOW, 2, FOREVER).expired == {1, 2, 3}
    assert expired_by_iceberg(graph, NOW, 20, 2, FOREVER).expired == {1, 2}  # 3, 4, 5 are at or after 20


def test_a_branch_keeps_its_own_count_and_a_tag_its_snapshot() -> None:
    snapshots = (*chain(1, 2, 3, 4), (10, 2, 50), (11, 10, 60), (12, 11, 70))
    refs = (
        main(4),
        RefFacts(name="audit", kind="branch", snapshot_id=12, min_snapshots_to_keep=3),
        RefFacts(name="first", kind="tag", snapshot_id=1),
    )
    forecast = expired_by_iceberg(SnapshotGraph(snapshots=snapshots, refs=refs), NOW, NOW, 1, FOREVER)
    assert forecast.expired == {2, 3} and forecast.dropped_refs == ()


def test_a_branch_with_its_own_age_keeps_younger_ancestors() -> None:
    graph = SnapshotGraph(snapshots=chain(1, 2, 3, 4), refs=(main(4, max_snapshot_age_ms=NOW - 15),))
    # its cutoff is NOW - (NOW - 15) = 15 ms: 3 (20 ms) and 4 (30 ms) are younger, whatever older_than says
    assert expired_by_iceberg(graph, NOW, NOW, 1, FOREVER).expired == {1, 2}


def test_refs_past_their_max_ref_age_are_dropped_but_never_main() -> None:
    refs = (
        main(3, max_ref_age_ms=1),
        RefFacts(name="old", kind="tag", snapshot_id=1, max_ref_age_ms=NOW - 5),
        RefFacts(name="by_table", kind="branch", snapshot_id=2),  # age NOW - 10 > NOW - 20
    )
    forecast = expired_by_iceberg(SnapshotGraph(snapshots=chain(1, 2, 3), refs=refs), NOW, NOW, 1, NOW - 20)
    assert forecast.dropped_refs == ("by_table", "old")
    assert forecast.expired == {1, 2}


def test_unreferenced_snapshots_go_only_when_old_and_walks_stop_at_a_gap() -> None:
    snapshots = (*chain(1, 2, 3), (7, 99, 40), (8, None, 5))  # 7's parent was expired earlier
    refs = (main(7),)
    forecast = expired_by_iceberg(SnapshotGraph(snapshots=snapshots, refs=refs), NOW, 15, 3, FOREVER)
    # main reaches only 7; 1, 2, 3 and 8 are unreferenced: 3 (20 ms) is younger than 15 ms and stays
    assert forecast.expired == {1, 2, 8}
