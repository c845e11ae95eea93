"""Real Iceberg tables for the benchmarks, made fast.

Spark writes a small template table (22 or 3 columns, partitioned by day). A large table is then
generated from it: its manifests are Avro container files with the template manifest's own writer
schema, codec and block size, whose entries are new heads (status, path, partition, record count, size:
encoded by fastavro with that schema) followed by the verbatim column-statistics bytes of the template's
Spark-written entries; a manifest list, a metadata file (one snapshot whose summary totals agree) and a
catalog entry (`register_table`) complete it. Spark reads these tables' metadata tables like any other;
the data files they list are not written (no status path opens a data file).

A fleet is many catalog entries registered from copies of one small real table's metadata file, each
with its own location, so that a later append to one of them is a real commit of that table alone.
"""

from __future__ import annotations

import json
import random
import uuid
import zlib
from datetime import date
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import fastavro
import pyarrow as pa

from bench._fixtures import NAMESPACE, Bench
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.avro_walk import encode_long

MiB = 1 << 20
_SYNC_INTERVAL = 64_000  # Avro's (and so Iceberg Java's) default block size


def key(name: str) -> TableKey:
    return TableKey(catalog="lake", namespace=(NAMESPACE,), name=name)


def template(bench: Bench, columns: int, long_bounds: bool = False) -> str:
    """A Spark-written table of `columns` columns (id, day, then strings/doubles/longs), a few files.
    With `long_bounds`, its strings are 8 to 607 characters long and the table keeps `full` metrics, so
    string bounds are whole values (mostly 64 bytes or more) instead of 16-character truncations."""
    name = f"template_{columns}{'_long' if long_bounds else ''}"
    if bench.exists(name):
        return name
    kinds = ("string", "double", "bigint")
    extra = [(f"c{i}", kinds[i % 3]) for i in range(columns - 2)]
    columns_sql = ", ".join(f"{n} {t}" for n, t in [("id", "bigint"), ("day", "date"), *extra])
    strings = "substr(repeat(uuid(), 17), 1, 8 + CAST(rand() * 600 AS INT))" if long_bounds else "uuid()"
    values = {"string": strings, "double": "rand()", "bigint": "id * 7"}
    select = ", ".join(f"{values[t]} AS {n}" for n, t in extra)
    metrics = ", 'write.metadata.metrics.default'='full'" if long_bounds else ""
    bench.spark.sql(
        f"CREATE TABLE lake.{NAMESPACE}.{name} ({columns_sql}) USING iceberg PARTITIONED BY (day) "
        f"TBLPROPERTIES ('format-version'='2'{metrics})"
    )
    bench.spark.sql(
        f"INSERT INTO lake.{NAMESPACE}.{name} SELECT id, date_add(DATE'2026-01-01', CAST(id % 8 AS INT))"
        f"{', ' + select if select else ''} FROM range(0, 4000, 1, 2)"
    )
    return name


def _local(uri: str) -> Path:
    return Path(urlparse(uri).path)


def _avro_file(schema: dict[str, Any], metadata: dict[str, str], entries: list[bytes]) -> bytes:
    """An Avro container file (deflate) from already encoded records, in blocks of ~64 kB."""
    sync = uuid.uuid4().bytes
    meta = {**metadata, "avro.schema": json.dumps(schema), "avro.codec": "deflate"}
    out = BytesIO()
    out.write(b"Obj\x01" + encode_long(len(meta)))
    for name, value in meta.items():
        raw_name, raw_value = name.encode(), value.encode()
        out.write(encode_long(len(raw_name)) + raw_name + encode_long(len(raw_value)) + raw_value)
    out.write(b"\x00" + sync)
    block: list[bytes] = []
    size = 0
    for index, entry in enumerate(entries):
        block.append(entry)
        size += len(entry)
        if size >= _SYNC_INTERVAL or index == len(entries) - 1:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            data = packer.compress(b"".join(block)) + packer.flush()
            out.write(encode_long(len(block)) + encode_long(len(data)) + data + sync)
            block, size = [], 0
    return out.getvalue()


def _head_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The entry schema cut after `file_size_in_bytes` (field 104): what a new entry's head encodes."""
    cut = json.loads(json.dumps(schema))
    data_file = next(f for f in cut["fields"] if f.get("field-id") == 2)["type"]
    fields = data_file["fields"]
    data_file["fields"] = fields[: next(i for i, f in enumerate(fields) if f.get("field-id") == 104) + 1]
    return cut


def generated(bench: Bench, columns: int, files: int, manifests: int, long_bounds: bool = False) -> str:
    """A table of `files` live data files in `manifests` manifests, generated from the template (with
    long string bounds if asked). Files are clustered by partition (200 a day, consecutive), as appends
    by day and `rewrite_manifests` leave them, so a manifest covers a few partitions."""
    days = max(1, files // 200)
    name = f"gen_{columns}c_{files}f_{manifests}m_{days}p{'_long' if long_bounds else ''}"
    if bench.exists(name):
        return name
    source = bench.catalog.load_table(key(template(bench, columns, long_bounds)).identifier)
    snapshot = source.current_snapshot()
    list_path = snapshot.manifest_list
    with open(_local(list_path), "rb") as stream:
        list_reader = fastavro.reader(stream)
        list_schema, list_meta = list_reader.writer_schema, dict(list_reader.metadata)
        list_template = next(iter(list_reader))
    manifest_path = list_template["manifest_path"]  # type: ignore[index,call-overload]
    raw = _local(manifest_path).read_bytes()
    reader = fastavro.reader(BytesIO(raw))
    schema = reader.writer_schema
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    samples = list(reader)
    heads = fastavro.parse_schema(_head_schema(schema))  # type: ignore[arg-type]
    tails = []
    for entry, encoded in zip(samples, _entry_bytes(raw, schema), strict=True):
        head = BytesIO()
        fastavro.schemaless_writer(head, heads, entry)
        assert encoded.startswith(head.getvalue()), "template entry head does not re-encode identically"
        tails.append(encoded[len(head.getvalue()) :])

    location = (bench.workdir / "generated" / name).resolve()
    (location / "metadata").mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{columns}/{files}/{manifests}")
    data_dir = f"{location.as_uri()}/data"
    per_manifest = [files // manifests + (1 if i < files % manifests else 0) for i in range(manifests)]
    list_records, totals = [], {"records": 0, "bytes": 0}
    number = 0
    for index, count in enumerate(per_manifest):
        encoded_entries, manifest_rows = [], 0
        for _ in range(count):
            size = int(rng.lognormvariate(15.5, 1.6)) + 1000  # median ~5 MiB: many small files
            records = max(1, size // 100)
            entry, day = samples[number % len(samples)], number * days // files
            data_file = entry["data_file"] | {  # type: ignore[index,operator]
                "file_path": f"{data_dir}/day={day:05d}/{number:010d}-{uuid.uuid4()}.parquet",
                "partition": {"day": day + 20000},
                "record_count": records,
                "file_size_in_bytes": size,
            }
            head = BytesIO()
            fastavro.schemaless_writer(head, heads, entry | {"status": 1, "data_file": data_file})  # type: ignore[operator]
            encoded_entries.append(head.getvalue() + tails[number % len(tails)])
            manifest_rows += records
            totals["bytes"] += size
            number += 1
        totals["records"] += manifest_rows
        body = _avro_file(schema, meta, encoded_entries)
        path = location / "metadata" / f"{uuid.uuid4()}-m{index}.avro"
        path.write_bytes(body)
        list_records.append(
            list_template  # type: ignore[operator]
            | {
                "manifest_path": path.as_uri(),
                "manifest_length": len(body),
                "added_files_count": count,
                "existing_files_count": 0,
                "deleted_files_count": 0,
                "added_rows_count": manifest_rows,
                "existing_rows_count": 0,
                "deleted_rows_count": 0,
            }
        )
    new_list = location / "metadata" / f"snap-{uuid.uuid4()}.avro"
    with new_list.open("wb") as out:
        list_meta = {k: v for k, v in list_meta.items() if not k.startswith("avro.")}
        fastavro.writer(out, list_schema, list_records, codec="deflate", metadata=list_meta)
    metadata = json.loads(_local(source.metadata_location).read_text())
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    current["manifest-list"] = new_list.as_uri()
    current["summary"] = {
        "operation": "append",
        "added-data-files": str(files),
        "added-records": str(totals["records"]),
        "added-files-size": str(totals["bytes"]),
        "total-data-files": str(files),
        "total-delete-files": "0",
        "total-records": str(totals["records"]),
        "total-files-size": str(totals["bytes"]),
        "total-position-deletes": "0",
        "total-equality-deletes": "0",
    }
    metadata |= {
        "location": location.as_uri(),
        "table-uuid": str(uuid.uuid4()),
        "snapshots": [current],
        "snapshot-log": [{"timestamp-ms": current["timestamp-ms"], "snapshot-id": current["snapshot-id"]}],
        "metadata-log": [],
        "refs": {"main": {"snapshot-id": current["snapshot-id"], "type": "branch"}},
    }
    metadata_file = location / "metadata" / f"00000-{uuid.uuid4()}.metadata.json"
    metadata_file.write_text(json.dumps(metadata))
    bench.catalog.register_table((NAMESPACE, name), metadata_file.as_uri())
    return name


def _entry_bytes(raw: bytes, schema: dict[str, Any]) -> list[bytes]:
    """Each record's exact bytes in an Avro file: where fastavro's reader of one record stops."""
    parsed = fastavro.parse_schema(schema)  # type: ignore[arg-type]
    found = []
    for block in fastavro.block_reader(BytesIO(raw)):
        data = block.bytes_  # type: ignore[attr-defined]
        for _ in range(block.num_records):
            start = data.tell()
            fastavro.schemaless_reader(data, parsed, None)
            found.append(data.getvalue()[start : data.tell()])
        assert data.tell() == len(data.getvalue()), "a template block does not end with its last record"
    return found


def fleet(bench: Bench, count: int, prefix: str = "fleet", appends: int = 2) -> list[TableKey]:
    """`count` catalog entries `<prefix>_<n>`, each a copy of one small real table of `appends` one-row
    appends (8 or more: small files make it critical) with its own location. Made once per work
    directory; registering is the slow part (several ms a table)."""
    names = [f"{prefix}_{n:05d}" for n in range(count)]
    existing = {ident[-1] for ident in bench.catalog.list_tables(NAMESPACE)}
    missing = [n for n in names if n not in existing]
    if missing:
        seed_name = f"{prefix}_seed"
        if seed_name not in existing:
            seed = bench.catalog.create_table((NAMESPACE, seed_name), schema=pa.schema([("id", pa.int64())]))
            for row in range(appends):
                seed.append(pa.table({"id": pa.array([row], pa.int64())}))
        seed = bench.catalog.load_table((NAMESPACE, seed_name))
        metadata = json.loads(_local(seed.metadata_location).read_text())
        for name in missing:
            location = (bench.workdir / "fleet" / name).resolve()
            (location / "metadata").mkdir(parents=True, exist_ok=True)
            copy = metadata | {"location": location.as_uri(), "table-uuid": str(uuid.uuid4())}
            path = location / "metadata" / f"00000-{uuid.uuid4()}.metadata.json"
            path.write_text(json.dumps(copy))
            bench.catalog.register_table((NAMESPACE, name), path.as_uri())
    return [key(n) for n in names]


def append_one_row(bench: Bench, table_key: TableKey, catalog: Any = None) -> None:
    """A real commit to one table (PyIceberg writes a data file, a manifest and a metadata file), through
    `catalog` (the benchmark's embedded `lake` by default)."""
    table = (catalog or bench.catalog).load_table(table_key.identifier)
    table.append(pa.table({"id": pa.array([date.today().toordinal()], pa.int64())}))
