"""Benchmark 2: incremental re-status.

A. Re-status of a fleet when 1% of its tables changed (real PyIceberg appends): `StatusTracker` lists
   every metadata location in one catalog query, skips unchanged tables entirely and, for the changed
   ones, decodes only the new manifests (`ManifestCache`).
B. A new process (every health-sync run is one) measuring a large table again: manifest summaries
   from the state database (`ManifestSummaryStore`, SQLite here) vs decoding every manifest, side by
   side.

    .venv/bin/python bench/incremental_status.py [--quick]
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _tables  # noqa: E402
from bench._fixtures import Bench, arguments, machine, ratio, table, timed  # noqa: E402
from icepack_dagster.iceberg.manifest_cache import ManifestCache  # noqa: E402
from icepack_dagster.iceberg.status_reader import read_status  # noqa: E402
from icepack_dagster.iceberg.status_tracker import FleetRefresh, StatusTracker  # noqa: E402
from icepack_dagster.store.manifest_store import ManifestSummaryStore  # noqa: E402


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    bench = Bench(args.workdir)
    fleet_size = 1_000 if args.quick else 10_000
    big = (22, 10_000, 100) if args.quick else (22, 1_000_000, 1_000)
    print(f"Incremental status benchmark ({'quick' if args.quick else 'full'}); {machine()}")
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
        ["refresh", "wall s", "cpu s", "tables read", "skipped", "manifests decoded"],
        [
            ["first (all read)", cold_wall, cold_cpu, len(cold.read), 0, "-"],
            [f"after {len(changed)} changed", warm_wall, warm_cpu, len(warm.read), len(warm.unchanged),
             tracker.cache.misses - misses],
        ],
    )

    big_key = _tables.key(_tables.generated(bench, *big))
    table(
        f"B. A new process measures the table of {big[1]:,} files / {big[2]} manifests again",
        ["summaries", "wall s", "cpu s", "manifests decoded", "from the store", "decode / store"],
        stored_summaries(bench, big_key),
    )


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
