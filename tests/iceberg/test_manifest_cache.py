"""Contract: a manifest's aggregate (`summarize_manifest`) is exact whichever way its entries were
decoded, by a pattern compiled from an entry's shape or by the exact Python decoder, and agrees with a
plain fastavro decode of every field: for Spark-written manifests (long and short paths and bounds,
nulls, position deletes) and for generated ones of any shape (unions either way, stats arrays of any
length, bounds and paths across the one-, two- and three-byte length prefixes, several Avro blocks).
Entries of one shape are decoded by one pattern after the first. Aggregates are cached by path: a
re-status with the same `ManifestCache` decodes no manifest again, and after an append only the new one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from random import Random
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg import entry_patterns, manifest_entries
from icepack_dagster.iceberg.avro_walk import decode_long
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.manifest_cache import ManifestCache
from icepack_dagster.iceberg.manifest_entries import ManifestEntries
from icepack_dagster.iceberg.manifest_reader import ManifestRef, read_manifest_list, summarize_manifest
from icepack_dagster.iceberg.manifest_summary import (
    SIZE_BUCKET_BOUNDS,
    ManifestSummary,
    PartitionFiles,
    json_safe,
    large_file_threshold,
    partition_id,
)
from icepack_dagster.iceberg.status_reader import read_status
from tests.iceberg.test_status_reader import _table, assert_matches_spark

pytestmark = pytest.mark.spark

THRESHOLDS = HealthThresholds()
SMALL = 1200


def reference(io: FileIO, ref: ManifestRef, small: int) -> ManifestSummary:
    """The aggregate from fastavro's full decode of every field: the slow, obviously right way."""
    with io.new_input(ref.path).open() as stream:
        entries = list(fastavro.reader(BytesIO(stream.read())))
    live = [e["data_file"] for e in entries if e["status"] != 2]  # type: ignore[index,call-overload]
    data = [f for f in live if f.get("content", 0) == 0]
    position = [f for f in live if f.get("content", 0) == 1]
    equality = [f for f in live if f.get("content", 0) == 2]
    sizes = [f["file_size_in_bytes"] for f in data]
    histogram = [0] * (len(SIZE_BUCKET_BOUNDS) + 1)
    for size in sizes:
        histogram[sum(1 for bound in SIZE_BUCKET_BOUNDS if size >= bound)] += 1
    return ManifestSummary(
        data_files=len(data),
        data_bytes=sum(sizes),
        records=sum(f["record_count"] for f in data),
        position_delete_files=len(position),
        position_delete_records=sum(f["record_count"] for f in position),
        equality_delete_files=len(equality),
        equality_delete_records=sum(f["record_count"] for f in equality),
        delete_bytes=sum(f["file_size_in_bytes"] for f in position + equality),
        small_files=sum(1 for size in sizes if size < small),
        small_bytes=sum(size for size in sizes if size < small),
        size_histogram=tuple(histogram),
        partitions=frozenset(partition_id(tuple(f["partition"].values())) for f in data),
        partition_files=_partition_files(entries, ref, small),
    )


def _partition_files(entries: list[Any], ref: ManifestRef, small: int) -> tuple[PartitionFiles, ...]:
    """Per partition: small and large data files, delete files (position deletes and their bytes among
    them), and the snapshots that added them."""
    large = large_file_threshold(small)
    tallies: dict[tuple[Any, ...], list[Any]] = {}
    for entry in (e for e in entries if e["status"] != 2):
        file = entry["data_file"]
        size, data = file["file_size_in_bytes"], file.get("content", 0) == 0
        if data and small <= size <= large:
            continue
        tally = tallies.setdefault(json_safe(tuple(file["partition"].values())), [0, 0, 0, 0, 0, set(), 0, 0])
        if not data:
            tally[4] += 1
            if file.get("content") == 1:  # position deletes
                tally[6] += 1
                tally[7] += size
        else:
            index = 0 if size < small else 2
            tally[index] += 1
            tally[index + 1] += size
        snapshot = entry.get("snapshot_id")
        snapshot = ref.added_snapshot_id if snapshot is None else snapshot
        tally[5].update(() if snapshot is None else (snapshot,))
    found = [
        PartitionFiles(
            v,
            *t[:5],
            snapshot_ids=tuple(sorted(t[5])),
            position_delete_files=t[6],
            position_delete_bytes=t[7],
        )
        for v, t in tallies.items()
    ]
    return tuple(sorted(found, key=lambda f: repr(f.values)))


@pytest.fixture
def patterns_always(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Compile a pattern for every new shape, however small the manifest; count the entries that the
    latest pattern did not fit (each is tried on other patterns or decoded exactly)."""
    monkeypatch.setattr(manifest_entries, "_COMPILE_WORTH", 0)
    misses: list[int] = []
    other = manifest_entries.ManifestEntries._other

    def counted(self: Any, *args: Any) -> Any:
        misses.append(1)
        return other(self, *args)

    monkeypatch.setattr(manifest_entries.ManifestEntries, "_other", counted)
    return misses


def test_spark_manifests_decode_exactly_through_patterns(spark, catalogs, namespace, patterns_always) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "shapes")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, s string, d double, p string) USING iceberg "
        "PARTITIONED BY (p) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.distribution-mode'='none', 'write.spark.fanout.enabled'='true', "
        f"'icepack.small-file-threshold-bytes'='{SMALL}')"
    )
    # 48 files over partition names of 1 to 70 characters (paths of many lengths), some null doubles
    spark.sql(
        f"INSERT INTO {qualified} SELECT id, repeat('x', CAST(id % 90 AS INT)), "
        "CASE WHEN id % 7 = 0 THEN NULL ELSE id / 3.0 END, repeat('p', CAST(1 + id % 6 * 14 AS INT)) "
        "FROM range(0, 480, 1, 8)"
    )
    spark.sql(f"ALTER TABLE {qualified} SET TBLPROPERTIES ('write.metadata.metrics.default'='full')")
    spark.sql(  # full metrics: string bounds of up to 100 bytes, past the one-byte length prefix
        f"INSERT INTO {qualified} SELECT id, repeat('y', 100), id, 'q' FROM range(0, 40, 1, 4)"
    )
    spark.sql(f"DELETE FROM {qualified} WHERE id IN (3, 500)")
    table = catalogs.get("lake").load_table(key.identifier)
    refs = read_manifest_list(table.io, table.current_snapshot().manifest_list)  # type: ignore[union-attr]
    assert len(refs) == 3 and sum(ref.live_files or 0 for ref in refs) > 40

    for ref in refs:
        assert summarize_manifest(table.io, ref, SMALL) == reference(table.io, ref, SMALL), ref.path

    assert len(patterns_always) < sum(ref.entries or 0 for ref in refs) / 2  # most entries fit a pattern
    assert_matches_spark(spark, read_status(table, key, THRESHOLDS, datetime.now(UTC)), qualified)


# --- generated manifests of any shape --------------------------------------------------------------
def _stats(name: str, field_id: int, value: str) -> dict[str, Any]:
    item = {
        "type": "record",
        "name": f"k{field_id}_v{field_id + 1}",
        "fields": [
            {"name": "key", "type": "int", "field-id": field_id},
            {"name": "value", "type": value, "field-id": field_id + 1},
        ],
    }
    return {"name": name, "type": ["null", {"type": "array", "items": item}], "default": None}


MANIFEST_SCHEMA = {
    "type": "record",
    "name": "manifest_entry",
    "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {"name": "snapshot_id", "type": ["null", "long"], "field-id": 1},
        {"name": "sequence_number", "type": ["null", "long"], "field-id": 3},
        {
            "name": "data_file",
            "field-id": 2,
            "type": {
                "type": "record",
                "name": "r2",
                "fields": [
                    {"name": "content", "type": "int", "field-id": 134},
                    {"name": "file_path", "type": "string", "field-id": 100},
                    {"name": "file_format", "type": "string", "field-id": 101},
                    {
                        "name": "partition",
                        "field-id": 102,
                        "type": {
                            "type": "record",
                            "name": "r102",
                            "fields": [
                                {"name": "n", "type": ["null", "int"], "field-id": 1000},
                                {"name": "s", "type": ["null", "string"], "field-id": 1001},
                                {"name": "b", "type": "boolean", "field-id": 1002},
                            ],
                        },
                    },
                    {"name": "record_count", "type": "long", "field-id": 103},
                    {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
                    _stats("column_sizes", 117, "long"),
                    _stats("null_value_counts", 121, "long"),
                    _stats("lower_bounds", 126, "bytes"),
                    _stats("upper_bounds", 129, "bytes"),
                    {"name": "key_metadata", "type": ["null", "bytes"], "field-id": 131},
                    {"name": "split_offsets", "type": ["null", {"type": "array", "items": "long"}]},
                    {"name": "sort_order_id", "type": ["null", "int"], "field-id": 140},
                ],
            },
        },
    ],
}

_long = st.integers(-(2**63), 2**63 - 1)
_size = st.one_of(st.integers(0, 2**12), st.integers(0, 2**40), st.sampled_from(SIZE_BUCKET_BOUNDS))
_bytes = st.one_of(st.binary(max_size=20), st.binary(min_size=60, max_size=70), st.binary(max_size=300))
_bound = st.one_of(  # column bounds: one-byte length prefixes, two-byte ones, and past the patterns' limit
    st.binary(max_size=63), st.binary(min_size=64, max_size=400), st.binary(min_size=900, max_size=1100)
)


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def _pairs(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return _optional(st.lists(st.fixed_dictionaries({"key": st.integers(0, 2**31 - 1), "value": value})))


_entry = st.fixed_dictionaries(
    {
        "status": st.integers(0, 2),
        "snapshot_id": _optional(_long),
        "sequence_number": _optional(_long),
        "data_file": st.fixed_dictionaries(
            {
                "content": st.integers(0, 2),
                "file_path": st.one_of(
                    st.text(max_size=10), st.text(min_size=60, max_size=200), st.just("f" * 9000)
                ),
                "file_format": st.sampled_from(["PARQUET", "AVRO", "ORC"]),
                "partition": st.fixed_dictionaries(
                    {
                        "n": _optional(st.integers(-3, 3)),
                        "s": _optional(st.sampled_from(["", "a", "b" * 70])),
                        "b": st.booleans(),
                    }
                ),
                "record_count": st.integers(0, 2**50),
                "file_size_in_bytes": _size,
                "column_sizes": _pairs(_long),
                "null_value_counts": _pairs(_long),
                "lower_bounds": _pairs(_bytes),
                "upper_bounds": _pairs(_bound),
                "key_metadata": _optional(_bytes),
                "split_offsets": _optional(st.lists(_long, max_size=3)),
                "sort_order_id": _optional(st.integers(0, 9)),
            }
        ),
    }
)


@pytest.fixture(scope="module")
def manifest_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("manifests")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    template=_entry,
    others=st.lists(_entry, max_size=12),
    copies=st.integers(1, 60),
    sync_interval=st.sampled_from([200, 16_000]),
)
def test_generated_manifests_decode_exactly(
    manifest_dir: Path,
    patterns_always: list[int],
    template: Any,
    others: Any,
    copies: int,
    sync_interval: int,
) -> None:
    """Copies of one entry (one shape, distinct paths) mixed with arbitrary ones, in small or large blocks."""
    data_file = template["data_file"]
    path_of = data_file["file_path"]
    entries = [template | {"data_file": data_file | {"file_path": f"{path_of}{i}"}} for i in range(copies)]
    entries[len(entries) // 2 : len(entries) // 2] = others
    path = manifest_dir / "m.avro"
    with path.open("wb") as out:
        fastavro.writer(out, MANIFEST_SCHEMA, entries, codec="deflate", sync_interval=sync_interval)
    io = PyArrowFileIO()
    ref = ManifestRef(path=str(path), length=path.stat().st_size, spec_id=0, content=0, live_files=None)
    patterns_always.clear()

    assert summarize_manifest(io, ref, 1 << 20) == reference(io, ref, 1 << 20)
    bounds = [*(data_file["lower_bounds"] or ()), *(data_file["upper_bounds"] or ())]
    if all(len(bound["value"]) < entry_patterns.LONG_LIMIT for bound in bounds):
        assert len(patterns_always) <= len(others) + 4  # the copies share a pattern or two
    # (a bound of 1024 bytes or more inside an array has no pattern: such entries are decoded exactly)
    assert decoded(path) == decoded_by_fastavro(path)


def decoded(path: Path) -> list[tuple[Any, ...]]:
    """Every entry's (status, content, partition, record count, file size, snapshot id) as the decoder
    reads them."""
    entries = ManifestEntries(path.read_bytes(), str(path), None)
    return [
        (decode_long(status), decode_long(content), entries.partition(partition), decode_long(records),
         decode_long(size), entries.snapshot(snapshot))
        for status, content, partition, records, size, snapshot, _ in entries
    ]


def decoded_by_fastavro(path: Path) -> list[tuple[Any, ...]]:
    with path.open("rb") as stream:
        return [
            (entry["status"], file["content"], tuple(file["partition"].values()), file["record_count"],
             file["file_size_in_bytes"], entry.get("snapshot_id"))
            for entry in fastavro.reader(stream)
            for file in [entry["data_file"]]  # type: ignore[index,call-overload]
        ]


_bound_lengths = st.lists(  # per entry, the lengths of the lower and upper bounds of three columns
    st.lists(st.one_of(st.integers(0, 63), st.integers(64, 1023)), min_size=6, max_size=6),
    min_size=40,
    max_size=150,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=_bound_lengths, seed=st.integers(0, 2**32), beyond=st.sets(st.integers(0, 149), max_size=3))
def test_long_bounds_of_mixed_lengths_share_one_pattern(
    manifest_dir: Path, patterns_always: list[int], lengths: list[list[int]], seed: int, beyond: set[int]
) -> None:
    """Entries alike but for their bounds, of 0 to 1023 bytes (one- and two-byte length prefixes, a new
    mix in every entry), all fit the pattern learnt from one of them: the walk stays in the regex
    engine, and every entry decodes to fastavro's values. A few entries with a bound past the patterns'
    limit (two- or three-byte prefixes) are decoded exactly and the next entries fit again."""
    entries, random_bytes = [], Random(seed).randbytes  # any bytes: bounds look like prefixes too
    for index, row_lengths in enumerate(lengths):
        row = [random_bytes(length) for length in row_lengths]
        if index in beyond:
            row[5] = random_bytes(1024 + index * 60)
        pairs = [{"key": 3 + column, "value": value} for column, value in enumerate(row)]
        entries.append({
            "status": 1, "snapshot_id": 7, "sequence_number": 7, "data_file": {
                "content": 0, "file_path": f"s3://bucket/data/day={index % 3}/{index:08d}.parquet",
                "file_format": "PARQUET", "partition": {"n": index % 3, "s": None, "b": True},
                "record_count": 1000 + index, "file_size_in_bytes": 4096 * index,
                "column_sizes": [{"key": k, "value": 64 * k} for k in range(1, 9)],
                "null_value_counts": [{"key": k, "value": 0} for k in range(1, 9)],
                "lower_bounds": pairs[:3], "upper_bounds": pairs[3:], "key_metadata": None,
                "split_offsets": [4], "sort_order_id": 0,
            },
        })
    path = manifest_dir / "long_bounds.avro"
    with path.open("wb") as out:
        fastavro.writer(out, MANIFEST_SCHEMA, entries, codec="deflate")
    ref = ManifestRef(path=str(path), length=path.stat().st_size, spec_id=0, content=0, live_files=None)
    patterns_always.clear()

    assert decoded(path) == decoded_by_fastavro(path)
    past_limit = sum(1 for index in beyond if index < len(lengths))
    assert len(patterns_always) <= 2 + past_limit  # the first entry, the first long bound, and those
    assert summarize_manifest(PyArrowFileIO(), ref, 1 << 20) == reference(PyArrowFileIO(), ref, 1 << 20)


def test_corrupt_block_is_refused(manifest_dir: Path) -> None:
    entry = {"status": 1, "snapshot_id": None, "sequence_number": None, "data_file": {
        "content": 0, "file_path": "p", "file_format": "PARQUET", "partition": {"n": 1, "s": None, "b": True},
        "record_count": 1, "file_size_in_bytes": 10, "column_sizes": None, "null_value_counts": None,
        "lower_bounds": None, "upper_bounds": None, "key_metadata": None, "split_offsets": None,
        "sort_order_id": None}}
    schema = MANIFEST_SCHEMA | {"fields": [*MANIFEST_SCHEMA["fields"], {"name": "extra", "type": "long"}]}
    path = manifest_dir / "corrupt.avro"
    with path.open("wb") as out:  # the file says each entry has a trailing long that status does not expect
        fastavro.writer(out, schema, [entry | {"extra": 5}], codec="null")
    data = path.read_bytes()
    assert data.count(b'"extra", "type": "long"') == 1
    path.write_bytes(data := data.replace(b'"extra", "type": "long"', b'"extra", "type": "null"'))
    ref = ManifestRef(path=str(path), length=len(data), spec_id=0, content=0, live_files=None)
    with pytest.raises(ValueError, match="corrupt"):
        summarize_manifest(PyArrowFileIO(), ref, 100)


# --- the cache -------------------------------------------------------------------------------------
class CountingIO(FileIO):
    """The table's real FileIO, recording which files are opened for reading."""

    def __init__(self, inner: FileIO) -> None:
        super().__init__(inner.properties)
        self.inner = inner
        self.opened: list[str] = []

    def new_input(self, location: str) -> InputFile:
        self.opened.append(location)
        return self.inner.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        return self.inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self.inner.delete(location)


def _counted(catalogs: CatalogSet, key: TableKey) -> tuple[Table, CountingIO]:
    catalog = catalogs.get(key.catalog)
    loaded = catalog.load_table(key.identifier)
    io = CountingIO(loaded.io)
    return Table(loaded.name(), loaded.metadata, loaded.metadata_location, io, catalog), io


def test_cache_spares_decoding_unchanged_manifests(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "cached")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    for batch in range(3):
        spark.sql(f"INSERT INTO {qualified} VALUES ({batch})")
    manifests = {r[0] for r in spark.sql(f"SELECT path FROM {qualified}.manifests").collect()}
    table, io = _counted(catalogs, key)
    manifest_list = table.current_snapshot().manifest_list  # type: ignore[union-attr]
    cache, now = ManifestCache(), datetime.now(UTC)

    first = read_status(table, key, THRESHOLDS, now, workers=4, cache=cache)
    assert set(io.opened) == manifests | {manifest_list} and cache.misses == 3

    io.opened.clear()
    second = read_status(table, key, THRESHOLDS, now, workers=4, cache=cache)
    assert second == first
    assert io.opened == [manifest_list] and cache.hits == 3  # no manifest decoded again

    assert read_status(table, key, THRESHOLDS, now, workers=1) == first  # serial, uncached: same numbers

    spark.sql(f"INSERT INTO {qualified} VALUES (3)")
    table, io = _counted(catalogs, key)
    third = read_status(table, key, THRESHOLDS, datetime.now(UTC), workers=4, cache=cache)
    decoded = set(io.opened) - {table.current_snapshot().manifest_list}  # type: ignore[union-attr]
    assert len(decoded) == 1 and not decoded & manifests  # only the new manifest
    assert_matches_spark(spark, third, qualified)


def test_cache_is_bounded_least_recently_used_first(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "bounded")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    for batch in range(3):
        spark.sql(f"INSERT INTO {qualified} VALUES ({batch})")
    table, io = _counted(catalogs, key)
    cache = ManifestCache(max_entries=2)

    read_status(table, key, THRESHOLDS, datetime.now(UTC), cache=cache)
    assert len(cache) == 2
    io.opened.clear()
    read_status(table, key, THRESHOLDS, datetime.now(UTC), cache=cache)
    assert len(io.opened) > 1 and len(cache) == 2  # an evicted manifest is decoded again
    with pytest.raises(ValueError, match="max_entries"):
        ManifestCache(max_entries=0)
