"""Benchmark: a steady re-status per catalog kind, 1% of the tables changed.

The same fleet (registered copies of one small real table, `_tables.fleet`) is registered in three
catalogs: the embedded SQL catalog, Iceberg's REST catalog test server (the suite's,
`tests/config/catalogs/servers.py`) and moto's Glue. Each catalog's tables are measured once; then 1% of
them get a real PyIceberg append through that catalog, and a new `StatusTracker` seeded with the earlier
statuses (as a health-sync run process is) re-statuses the fleet. Measured: wall and CPU seconds of that
steady refresh, and how many tables were loaded (counted on the catalog object). Asserted: no failure,
and the changed tables, and only they, were read (statuses equal to a full load are the tests' part:
`tests/config/catalogs/test_change_detection.py`).

    .venv/bin/python bench/change_detection.py [--quick] [--tables N]
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from bench import _tables  # noqa: E402
from bench._fixtures import NAMESPACE, Bench, arguments, machine, table, timed  # noqa: E402
from icepack_dagster.config.settings import IcepackSettings, load_settings  # noqa: E402
from icepack_dagster.domain.table.key import TableKey  # noqa: E402
from icepack_dagster.iceberg.catalogs import CatalogSet  # noqa: E402
from icepack_dagster.iceberg.status_tracker import StatusTracker  # noqa: E402
from tests.config.catalogs.servers import moto_server, rest_catalog_server  # noqa: E402

KINDS = ("lake", "rest", "glue")


class CountingLoads(CatalogSet):
    """The benchmark's catalogs, each opened catalog's `load_table` counted."""

    def __init__(self, settings: IcepackSettings) -> None:
        super().__init__(settings)
        self.loads = 0

    def _open_uncached(self, name: str) -> Any:
        catalog = super()._open_uncached(name)
        load = catalog.load_table

        def counted(identifier: Any) -> Any:
            self.loads += 1
            return load(identifier)

        catalog.load_table = counted
        return catalog


def main() -> None:
    parser_args = arguments(
        __doc__.splitlines()[0],
        lambda parser: parser.add_argument("--tables", type=int, help="fleet size (default 1,000)"),
    )
    bench = Bench(parser_args.workdir)
    count = parser_args.tables or (100 if parser_args.quick else 1_000)
    print(f"Change detection benchmark, {count:,} tables, 1% changed; {machine()}")
    lake_keys = _tables.fleet(bench, count, prefix="detect")
    locations = bench.catalogs.metadata_locations("lake", [k.identifier for k in lake_keys])
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        os.environ[name] = value
    servers = Path(tempfile.mkdtemp(prefix="servers-", dir=bench.workdir))  # fresh catalogs each run
    with (
        rest_catalog_server(bench.settings.spark.jar_cache, servers) as rest_url,
        moto_server(servers, days_behind=0) as moto_url,
    ):
        settings = load_settings(
            home=bench.workdir / "home",
            catalogs={
                "lake": {"kind": "embedded"},
                "rest": {"kind": "rest", "uri": rest_url, "warehouse": "lake"},
                "glue": {"kind": "glue", "region": "us-east-1", "endpoint": moto_url},
            },
            status_workers=1,
        )
        rows = [steady_sync(settings, kind, lake_keys, locations) for kind in KINDS]
    table(
        f"Steady re-status of {count:,} tables, {max(1, count // 100)} changed by a real append, "
        "a new tracker seeded with the earlier statuses (as a health-sync run)",
        ["catalog", "wall s", "cpu s", "tables loaded", "tables read", "unchanged", "first (all read) s"],
        rows,
    )


def steady_sync(
    settings: IcepackSettings, kind: str, lake_keys: list[TableKey], locations: dict[Any, str]
) -> list[Any]:
    """One catalog kind's first measurement and steady refresh after 1% changed."""
    catalogs = CatalogSet(settings)
    keys = [TableKey(catalog=kind, namespace=k.namespace, name=k.name) for k in lake_keys]
    if kind != "lake":
        catalog = catalogs.get(kind)
        catalog.create_namespace_if_not_exists(NAMESPACE)
        for key, lake_key in zip(keys, lake_keys, strict=True):
            catalog.register_table(key.identifier, locations[lake_key.identifier])
    thresholds = settings.thresholds
    first_wall, _, first = timed(
        lambda: StatusTracker().refresh(catalogs, kind, keys, thresholds, datetime.now(UTC))
    )
    assert not first.failures, list(first.failures.items())[:3]
    changed = keys[::100]
    for key in changed:
        table_of = catalogs.get(kind).load_table(key.identifier)
        table_of.append(pa.table({"id": pa.array([len(key.name)], pa.int64())}))
    counting = CountingLoads(settings)
    tracker = StatusTracker()
    for key in keys:
        tracker.remember(key, first.statuses[key.text])
    wall, cpu, steady = timed(lambda: tracker.refresh(counting, kind, keys, thresholds, datetime.now(UTC)))
    assert not steady.failures and set(steady.read) == {k.text for k in changed}, steady.failures
    return [kind, wall, cpu, counting.loads, len(steady.read), len(steady.unchanged), first_wall]


if __name__ == "__main__":
    main()
