"""Benchmark 1: full status collection against the decode floor and against peers.

For generated tables of growing size (data files / manifests; 22 columns of statistics, and 3 at one
size), each reader runs in a fresh process (cold caches, honest peak memory) over the same manifests:

- floor: read + inflate  read every manifest and inflate its Avro blocks, decode nothing
- icepack decode         our entry decoder alone over every manifest (the decode floor of our approach)
- icepack read_status    the full status (`read_status`, one thread, no manifest cache)
- fastavro full decode   the standard Avro decode of every field of every entry
- pyiceberg inspect      `table.inspect.files()` (up to 100k files: it runs at a few thousand files/s)
- spark files table      `SELECT count(*), sum(..) FROM t.files` in the benchmark's Spark (2 cores)

    .venv/bin/python bench/status_collection.py [--quick]
"""

from __future__ import annotations

import sys
import tracemalloc
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _tables  # noqa: E402
from bench._fixtures import (  # noqa: E402
    NAMESPACE,
    Bench,
    arguments,
    child_report,
    in_child,
    machine,
    peak_rss_mib,
    ratio,
    table,
    timed,
)

QUICK = [(22, 1_000, 10), (22, 10_000, 100)]
FULL = [(22, 1_000, 10), (22, 10_000, 100), (22, 100_000, 300), (3, 100_000, 300), (22, 1_000_000, 1_000)]
SLOW_READERS_UP_TO = 100_000  # fastavro full decode and pyiceberg inspect above this take minutes
READERS = ("inflate", "decode", "status", "fastavro", "inspect")


def _manifest_paths(bench: Bench, name: str) -> tuple[Any, list[Any]]:
    from icepack_dagster.iceberg.manifest_reader import read_manifest_list

    loaded = bench.catalog.load_table(_tables.key(name).identifier)
    return loaded, read_manifest_list(loaded.io, loaded.current_snapshot().manifest_list)


def run_reader(bench: Bench, reader: str, name: str, mode: str) -> None:
    """In the child process: one reader over one table; prints its measurements. Mode "memory" traces
    Python allocations (tracemalloc, which slows the run, so timings come from a "time" run)."""
    import fastavro

    from icepack_dagster.iceberg import manifest_reader
    from icepack_dagster.iceberg.status_reader import read_status

    key = _tables.key(name)
    rss = peak_rss_mib()

    def read_bytes(path: str) -> bytes:
        with loaded.io.new_input(path).open() as stream:
            return bytes(stream.read())

    def inflate() -> int:
        return sum(
            len(block.bytes_.getvalue())
            for ref in refs
            for block in fastavro.block_reader(BytesIO(read_bytes(ref.path)))
        )

    def decode() -> int:
        entries = manifest_reader._Entries
        return sum(1 for ref in refs for _ in entries(read_bytes(ref.path), ref.path, ref.entries))

    def status() -> int:
        table = bench.catalog.load_table(key.identifier)
        measured = read_status(table, key, bench.settings.thresholds, datetime.now(UTC), workers=1)
        return measured.live_data_files

    def full_decode() -> int:
        return sum(1 for ref in refs for _ in fastavro.reader(BytesIO(read_bytes(ref.path))))

    def inspect() -> int:
        return int(bench.catalog.load_table(key.identifier).inspect.files().num_rows)

    loaded, refs = _manifest_paths(bench, name)
    work = {"inflate": inflate, "decode": decode, "status": status, "fastavro": full_decode}
    if mode == "memory":
        tracemalloc.start()
    wall, cpu, result = timed(work.get(reader, inspect))
    heap = tracemalloc.get_traced_memory()[1] / 2**20 if mode == "memory" else None
    child_report(wall, cpu, rss, result=result, heap_mib=heap)


def spark_files(bench: Bench, name: str) -> tuple[float, int]:
    query = (
        f"SELECT count(*), sum(file_size_in_bytes), sum(record_count) FROM lake.{NAMESPACE}.{name}.files"
    )
    bench.spark.sql(query).collect()  # warm: Spark compiles the query plan once
    wall, _, rows = timed(lambda: bench.spark.sql(query).collect())
    return wall, int(rows[0][0])


def main() -> None:
    args = arguments(__doc__.splitlines()[0], lambda p: p.add_argument("--child", nargs=3))
    bench = Bench(args.workdir)
    if args.child:
        run_reader(bench, *args.child)
        return
    print(f"Status collection benchmark ({'quick' if args.quick else 'full'}); {machine()}")
    rows, growth = [], []
    for columns, files, manifests in QUICK if args.quick else FULL:
        name = _tables.generated(bench, columns, files, manifests)
        size = f"{files:,} files / {manifests} m / {columns} cols"
        found: dict[str, dict[str, Any]] = {}
        for reader in READERS:
            if reader in ("fastavro", "inspect") and files > SLOW_READERS_UP_TO:
                continue
            found[reader] = in_child(Path(__file__), reader, name, "time", "--workdir", str(args.workdir))
            assert found[reader]["result"] == files or reader == "inflate", (reader, found[reader])
            found[reader] |= {"heap_mib": "-", "peak_mib": "-"}
            if not args.quick or reader == "status":  # a second, traced run for memory
                memory = in_child(Path(__file__), reader, name, "memory", "--workdir", str(args.workdir))
                found[reader] |= {"heap_mib": memory["heap_mib"], "peak_mib": memory["peak_mib"]}
        spark_wall, spark_count = spark_files(bench, name)
        assert spark_count == files
        floor, ours = found["inflate"]["cpu"], found["status"]["cpu"]
        labels = {
            "inflate": "floor: read + inflate",
            "decode": "icepack decode only",
            "status": "icepack read_status",
            "fastavro": "fastavro full decode",
            "inspect": "pyiceberg inspect.files",
        }
        for reader, measured in found.items():
            rows.append([
                size, labels[reader], measured["wall"], measured["cpu"], files / measured["cpu"],
                ratio(measured["cpu"], floor), ratio(measured["cpu"], ours), measured["heap_mib"],
                measured["peak_mib"],
            ])
        rows.append([size, "spark files table (2 cores)", spark_wall, "-", files / spark_wall,
                     ratio(spark_wall, floor), ratio(spark_wall, found["status"]["wall"]), "JVM", "JVM"])
        growth.append([size, ours / files * 1e6, found["decode"]["cpu"] / files * 1e6,
                       ratio(ours, found["decode"]["cpu"]), found["status"]["heap_mib"]])
    table(
        "Entries/s use CPU seconds for the Python readers (one thread each) and wall seconds for Spark.\n"
        "heap MiB: peak Python allocations (tracemalloc; pyarrow's own pool is not traced); RSS+ MiB: how\n"
        "far the process's peak RSS rose above its peak after imports (0: the work stayed below it)",
        ["table", "reader", "wall s", "cpu s", "entries/s", "vs floor", "vs read_status", "heap MiB",
         "RSS+ MiB"],
        rows,
    )
    table(
        "How read_status grows with size (cost per entry should stay flat; memory bounded by streaming)",
        ["table", "status us/entry", "decode us/entry", "status / decode", "status heap MiB"],
        growth,
    )


if __name__ == "__main__":
    main()
