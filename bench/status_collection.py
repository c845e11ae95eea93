"""Benchmark 1: full status collection against the decode floor and against peers.

For generated tables of growing size (data files / manifests; 22 columns of statistics, and 3 at one
size), each reader runs in a fresh process (cold caches, honest peak memory) over the same manifests:

- floor: read + inflate  read every manifest and inflate its Avro blocks, decode nothing
- icepack decode         our entry decoder alone over every manifest (the decode floor of our approach)
- icepack read_status    the full status (`read_status`, one thread, no manifest cache)
- fastavro full decode   the standard Avro decode of every field of every entry
- pyiceberg inspect      `table.inspect.files()` (up to 100k files: it runs at a few thousand files/s)
- spark files table      `SELECT count(*), sum(..) FROM t.files` in the benchmark's Spark (2 cores)

With `--long-bounds`, an A/B in one process instead: our decoder against fastavro's full decode,
alternated over the same manifest bytes, on a table whose string columns keep `full` metrics (bounds of
8 to 607 bytes, mostly two-byte length prefixes) beside an ordinary table of the same size.

    .venv/bin/python bench/status_collection.py [--quick] [--long-bounds]
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
LONG_BOUNDS_QUICK, LONG_BOUNDS_FULL = (22, 5_000, 50), (22, 20_000, 100)
ROUNDS = 3  # A/B rounds; each reader's best round counts (a shared machine only ever adds time)


def _manifest_paths(bench: Bench, name: str) -> tuple[Any, list[Any]]:
    from icepack_dagster.iceberg.manifest_reader import read_manifest_list

    loaded = bench.catalog.load_table(_tables.key(name).identifier)
    return loaded, read_manifest_list(loaded.io, loaded.current_snapshot().manifest_list)


def run_reader(bench: Bench, reader: str, name: str, mode: str) -> None:
    """In the child process: one reader over one table; prints its measurements. Mode "memory" traces
    Python allocations (tracemalloc, which slows the run, so timings come from a "time" run)."""
    import fastavro

    from icepack_dagster.iceberg.manifest_entries import ManifestEntries
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
        return sum(1 for ref in refs for _ in ManifestEntries(read_bytes(ref.path), ref.path, ref.entries))

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


def run_long_bounds(bench: Bench, name: str) -> None:
    """In the child process: our decoder and fastavro's full decode alternated over the same manifest
    bytes (read into memory first, so no reader pays I/O); prints each reader's CPU seconds."""
    import fastavro

    from icepack_dagster.iceberg.manifest_entries import ManifestEntries

    loaded, refs = _manifest_paths(bench, name)
    manifests = []
    for ref in refs:
        with loaded.io.new_input(ref.path).open() as stream:
            manifests.append((ref, bytes(stream.read())))
    rss = peak_rss_mib()

    def decode() -> int:
        return sum(1 for ref, data in manifests for _ in ManifestEntries(data, ref.path, ref.entries))

    readers = {
        "inflate": lambda: sum(1 for _, data in manifests for _ in fastavro.block_reader(BytesIO(data))),
        "decode": decode,
        "fastavro": lambda: sum(1 for _, data in manifests for _ in fastavro.reader(BytesIO(data))),
    }
    first_wall, first_cpu, count = timed(decode)  # the first pass also compiles the table's patterns
    best: dict[str, float] = {}
    for _ in range(ROUNDS):
        for reader, work in readers.items():
            _, cpu, result = timed(work)
            assert reader == "inflate" or result == count, (reader, result, count)
            best[reader] = min(cpu, best.get(reader, cpu))
    child_report(first_wall, first_cpu, rss, result=count, best=best)


def long_bounds(bench: Bench, args: Any) -> None:
    """The A/B of `--long-bounds`: the same size with ordinary (truncated) and with long string bounds."""
    columns, files, manifests = LONG_BOUNDS_QUICK if args.quick else LONG_BOUNDS_FULL
    rows, ratios = [], []
    for kind, long in (("truncated bounds", False), ("long bounds (full)", True)):
        name = _tables.generated(bench, columns, files, manifests, long_bounds=long)
        found = in_child(Path(__file__), "ab", name, "time", "--workdir", str(args.workdir))
        assert found["result"] == files, found
        best, fastavro, first = found["best"], found["best"]["fastavro"], found["cpu"]
        size = f"{files:,} files / {manifests} m / {columns} cols, {kind}"
        rows += [
            [size, "floor: inflate", best["inflate"], files / best["inflate"], "-"],
            [size, "icepack decode, first pass", first, files / first, ratio(fastavro, first)],
            [size, "icepack decode", best["decode"], files / best["decode"], ratio(fastavro, best["decode"])],
            [size, "fastavro full decode", fastavro, files / fastavro, "1.00x"],
        ]
        ratios.append(f"{kind}: icepack decode is {ratio(fastavro, best['decode'])} as fast as fastavro")
    table(
        f"A/B in one process per table over the manifest bytes in memory; CPU seconds, best of {ROUNDS} "
        "alternated rounds.\nEvery reader inflates the Avro blocks (deflate), 'floor: inflate' does only "
        "that; 'icepack decode' finds\nevery entry and its six status values (ManifestEntries); 'fastavro "
        "full decode' builds every field of\nevery entry; 'first pass' is the process's first decode, which "
        "also compiles the table's patterns",
        ["table", "reader", "cpu s", "entries/s", "speed vs fastavro"],
        rows,
    )
    print("\n" + "\n".join(ratios))


def spark_files(bench: Bench, name: str) -> tuple[float, int]:
    query = (
        f"SELECT count(*), sum(file_size_in_bytes), sum(record_count) FROM lake.{NAMESPACE}.{name}.files"
    )
    bench.spark.sql(query).collect()  # warm: Spark compiles the query plan once
    wall, _, rows = timed(lambda: bench.spark.sql(query).collect())
    return wall, int(rows[0][0])


def main() -> None:
    def options(parser: Any) -> None:
        parser.add_argument("--child", nargs=3)
        parser.add_argument("--long-bounds", action="store_true", help="A/B of decoders on long bounds")

    args = arguments(__doc__.splitlines()[0], options)
    bench = Bench(args.workdir)
    if args.child:
        reader, name, mode = args.child
        run_long_bounds(bench, name) if reader == "ab" else run_reader(bench, reader, name, mode)
        return
    if args.long_bounds:
        print(f"Decoder A/B on long bounds ({'quick' if args.quick else 'full'}); {machine()}")
        long_bounds(bench, args)
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
