"""Benchmark 2: incremental re-status.

A. Re-status of a fleet when 1% of its tables changed (real PyIceberg appends): `StatusTracker` lists
   every metadata location in one catalog query, skips unchanged tables entirely and measures the
   changed ones from their snapshot summaries where they suffice, else decoding only the new manifests
   (`ManifestCache`).
B. A new process (every health-sync run is one) measuring a large table again: manifest summaries
   from the state database (`ManifestSummaryStore`, SQLite here) vs decoding every manifest, side by
   side.
C. The status of a table changed by one real append (PyIceberg), side by side in one process: from its
   snapshot summaries and manifest list (`summary_status`) against today's read of its manifests with
   the manifest cache as a health-sync run has it (empty in memory, every earlier manifest in the state
   database, the new one decoded and stored); same health checked.

    .venv/bin/python bench/incremental_status.py [--quick]
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
from sqlalchemy import delete

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _tables  # noqa: E402
from bench._fixtures import Bench, arguments, best_of, machine, ratio, table, timed  # noqa: E402
from icepack_dagster.domain.health.judging import assess_health  # noqa: E402
from icepack_dagster.domain.table.status import TableStatus  # noqa: E402
from icepack_dagster.iceberg.incremental_status.status_tracker import FleetRefresh, StatusTracker  # noqa: E402
from icepack_dagster.iceberg.incremental_status.summary_status import summary_status  # noqa: E402
from icepack_dagster.iceberg.manifest_cache import ManifestCache  # noqa: E402
from icepack_dagster.iceberg.status_reader import current_manifests, read_status  # noqa: E402
from icepack_dagster.store.manifest_store import ManifestSummaryStore, manifest_summaries  # noqa: E402
from icepack_dagster.store.state_database import open_state_database  # noqa: E402

RUNS = 5


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda parser: parser.add_argument("--parts", default="ABC", help="which parts to run, e.g. C"),
    )
    bench = Bench(args.workdir)
    print(f"Incremental status benchmark ({'quick' if args.quick else 'full'}); {machine()}")
    if "A" in args.parts or "B" in args.parts:
        fleet_and_store(bench, args.quick)
    if "C" in args.parts:
        sizes = [(22, 2_000, 20)] if args.quick else [(22, 10_000, 40), (22, 100_000, 300)]
        rows = [row for size in sizes for row in summary_against_manifests(bench, *size)]
        table(
            f"C. Status of a table after one real append, best of {RUNS}, the table already loaded (the last "
            "column adds the load to both). Summary path: walking main's new commits, summing their "
            "summaries, reading the manifest list, judging both ends of the bounds. Manifests (today): "
            "reading the manifest list, every earlier manifest's summary from the state database, "
            "decoding and storing the new manifest, folding them all",
            ["table", "path", "wall ms", "cpu ms", "files read", "today / summary: wall", "cpu",
             "with the load"],
            rows,
        )


def fleet_and_store(bench: Bench, quick: bool) -> None:
    """Parts A and B."""
    fleet_size = 1_000 if quick else 10_000
    big = (22, 10_000, 100) if quick else (22, 1_000_000, 1_000)
    wall, _, keys = timed(lambda: _tables.fleet(bench, fleet_size))
    print(f"fleet of {fleet_size:,} registered tables ready in {wall:.1f} s (made once per work directory)")

    tracker = StatusTracker()

    def refresh() -> FleetRefresh:
        return tracker.refresh(bench.catalogs, "lake", keys, bench.settings.thresholds, datetime.now(UTC))

    cold_wall, cold_cpu, cold = timed(refresh)
    assert not cold.failures, list(cold.failures.items())[:3]
    changed = keys[::100]
    for key in changed:
        _tables.append_one_row(bench, key)
    misses = tracker.cache.misses
    warm_wall, warm_cpu, warm = timed(refresh)
    assert set(warm.read) == {k.text for k in changed}
    assert len(warm.unchanged) == fleet_size - len(changed)
    table(
        f"A. Re-status of {fleet_size:,} tables, {len(changed)} ({len(changed) / fleet_size:.0%}) changed "
        "by a real append; unchanged tables are skipped entirely (same metadata file)",
        ["refresh", "wall s", "cpu s", "tables read", "skipped", "from summaries", "manifests decoded"],
        [
            ["first (all read)", cold_wall, cold_cpu, len(cold.read), 0, 0, "-"],
            [f"after {len(changed)} changed", warm_wall, warm_cpu, len(warm.read), len(warm.unchanged),
             sum(1 for s in warm.statuses.values() if s.depth == "summary"), tracker.cache.misses - misses],
        ],
    )

    big_key = _tables.key(_tables.generated(bench, *big))
    table(
        f"B. A new process measures the table of {big[1]:,} files / {big[2]} manifests again",
        ["summaries", "wall s", "cpu s", "manifests decoded", "from the store", "decode / store"],
        stored_summaries(bench, big_key),
    )



def summary_against_manifests(bench: Bench, columns: int, files: int, manifests: int) -> list[list[Any]]:
    """A copy of a generated table (small files under 1 MiB, so it is healthy), measured in full with the
    state database filling; one row appended; then its status by each path, each repetition with the
    state database as the run before left it."""
    generated = _tables.key(_tables.generated(bench, columns, files, manifests))
    source = bench.catalog.load_table(generated.identifier)
    name = f"summary_{files}f_{manifests}m"
    key = _tables.key(name)
    if bench.exists(name):
        bench.catalog.drop_table(key.identifier)  # the catalog entry only; a new copy is registered
    metadata = json.loads(Path(urlparse(source.metadata_location).path).read_text())
    location = (bench.workdir / "summary" / f"{name}-{uuid.uuid4().hex[:8]}").resolve()
    (location / "metadata").mkdir(parents=True)
    metadata |= {"location": location.as_uri(), "table-uuid": str(uuid.uuid4())}
    small = {"icepack.small-file-threshold-bytes": str(1 << 20)}
    metadata["properties"] = metadata.get("properties", {}) | small
    copy = location / "metadata" / f"00000-{uuid.uuid4()}.metadata.json"
    copy.write_text(json.dumps(metadata))
    bench.catalog.register_table(key.identifier, copy.as_uri())

    thresholds, now = bench.settings.thresholds, datetime.now(UTC)
    state = bench.workdir / f"bench-summary-{name}.db"
    state.unlink(missing_ok=True)
    store = ManifestSummaryStore(f"sqlite:///{state}")
    first = bench.catalog.load_table(key.identifier)
    known = read_status(first, key, thresholds, now, 1, ManifestCache(store=store))
    row = {field.name: _value(field.type) for field in source.schema().as_arrow()}
    appended = bench.catalog.load_table(key.identifier)
    appended.append(pa.Table.from_pylist([row], schema=appended.schema().as_arrow()))

    loaded = bench.catalog.load_table(key.identifier)
    current = loaded.metadata.current_snapshot_id
    new = [ref.path for ref in current_manifests(loaded, key.text) if ref.added_snapshot_id == current]
    database = open_state_database(store.url)
    caches: list[ManifestCache] = []

    def manifests() -> TableStatus:
        """A run's state database connection is open and used already (`known` was read through it); the
        new manifest is not stored yet; the in-memory cache is empty for this table."""
        with database.begin() as connection:
            connection.execute(delete(manifest_summaries).where(manifest_summaries.c.path.in_(new)))
        caches.append(ManifestCache(store=store))
        return read_status(loaded, key, thresholds, now, 1, caches[-1])

    full_wall, full_cpu, full = best_of(RUNS, manifests)
    fast_wall, fast_cpu, fast = best_of(RUNS, lambda: summary_status(loaded, key, known, thresholds, now))
    load_wall, _, _ = best_of(RUNS, lambda: bench.catalog.load_table(key.identifier))
    assert len(new) == 1 and all(cache.misses == 1 for cache in caches), "each read decodes the new manifest"
    assert isinstance(fast, TableStatus), f"the summary path was not taken: {fast}"
    assert assess_health(fast, thresholds) == assess_health(full, thresholds)
    assert (fast.live_data_files, fast.total_records, fast.live_data_bytes, fast.manifest_count) == (
        full.live_data_files, full.total_records, full.live_data_bytes, full.manifest_count
    )
    label = f"{files:,} files / {full.manifest_count} manifests"
    with_load = ratio(full_wall + load_wall, fast_wall + load_wall)
    today = f"list, {full.manifest_count - 1} stored, 1 decoded"
    return [
        [label, "manifests (today)", full_wall * 1000, full_cpu * 1000, today, "-", "-", "-"],
        [label, "summary path", fast_wall * 1000, fast_cpu * 1000, "list", ratio(full_wall, fast_wall),
         ratio(full_cpu, fast_cpu), with_load],
    ]


def _value(kind: pa.DataType) -> Any:
    """One value of an Arrow type of the generated tables' schema."""
    if pa.types.is_date(kind):
        return date(2026, 11, 26)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "appended"
    return 1.5 if pa.types.is_floating(kind) else 7


def stored_summaries(bench: Bench, key: Any) -> list[list[Any]]:
    """Fresh caches (as in a new process), one backed by a new state database that an earlier process
    filled, one without; the same table measured by each, results checked equal."""
    path = bench.workdir / "bench-manifest-summaries.db"
    path.unlink(missing_ok=True)
    store = ManifestSummaryStore(f"sqlite:///{path}")
    thresholds, now = bench.settings.thresholds, datetime.now(UTC)
    loaded = bench.catalog.load_table(key.identifier)
    read_status(loaded, key, thresholds, now, workers=1, cache=ManifestCache(store=store))  # an earlier run
    rows, results = [], []
    for label, cache in (("decoded", ManifestCache()), ("stored", ManifestCache(store=store))):
        wall, cpu, status = timed(
            lambda c=cache: read_status(loaded, key, thresholds, now, workers=1, cache=c)
        )
        results.append(status)
        rows.append([label, wall, cpu, cache.misses, cache.stored_hits, "-"])
    assert results[0] == results[1]
    rows[1][-1] = ratio(rows[0][1], rows[1][1])
    return rows


if __name__ == "__main__":
    main()
