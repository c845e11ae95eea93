"""Contract: orphan removal's location check (`domain/table/unreferenced_files.py`) names every case where a
listing of the table location cannot tell orphans from files to keep, and nothing else: references through
another scheme spelling or bucket under the location, another table's metadata inside the location;
a neighbour whose location only shares leading characters, files outside the location and the table's
own metadata are no conflict."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icepack_dagster.domain.table.unreferenced_files import (
    UnreferencedFile,
    on_object_store,
    orphan_removal_conflicts,
)

LOCATION = "s3://wh/lake/ns.db/events"
OWN = [f"{LOCATION}/metadata/00001-a.metadata.json", f"{LOCATION}/data/a.parquet"]


def listed(*locations: str) -> list[UnreferencedFile]:
    return [
        UnreferencedFile(location=p, size_bytes=1, modified_at=datetime(2026, 1, 1, tzinfo=UTC))
        for p in locations
    ]


def test_a_table_that_only_references_its_own_files_has_no_conflict() -> None:
    neighbour = "s3://wh/lake/ns.db/events_archive/metadata/00001-b.metadata.json"
    outside = "s3://other/elsewhere/data/x.parquet"  # write.data.path elsewhere: never listed, no conflict
    assert orphan_removal_conflicts("t", LOCATION, [*OWN, outside], listed(*OWN, neighbour)) == []


@pytest.mark.parametrize(
    "reference",
    ["s3a://wh/lake/ns.db/events/data/b.parquet", "s3://other-bucket/lake/ns.db/events/data/b.parquet"],
    ids=["scheme", "bucket"],
)
def test_a_reference_under_the_location_by_another_name_is_a_conflict(reference: str) -> None:
    [conflict] = orphan_removal_conflicts("lake.ns.events", LOCATION, [*OWN, reference], listed(*OWN))
    assert conflict.startswith("table lake.ns.events: remove_orphan_files refused, nothing was deleted")
    assert reference in conflict


def test_an_s3a_location_beside_s3_references_is_a_conflict() -> None:
    location = "s3a://wh/lake/ns.db/events"
    assert orphan_removal_conflicts("t", location, OWN, listed()) != []


def test_another_tables_metadata_inside_the_location_is_a_conflict() -> None:
    inner = f"{LOCATION}/nested/metadata/00000-c.metadata.json"
    [conflict] = orphan_removal_conflicts("t", LOCATION, OWN, listed(*OWN, inner))
    assert inner in conflict and "another table's metadata" in conflict


def test_object_stores_are_told_from_filesystems() -> None:
    assert on_object_store("s3://b/k") and on_object_store("s3a://b/k") and on_object_store("gs://b/k")
    assert (
        not on_object_store("file:///w") and not on_object_store("/w") and not on_object_store("hdfs://n/w")
    )
