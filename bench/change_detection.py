"""Benchmark: a steady re-status per catalog kind, 1% of the tables changed.

The same fleet (registered copies of one small real table, `_tables.fleet`) is registered in four
catalogs: the embedded SQL catalog, Iceberg's REST catalog test server twice (`tests/config/catalogs/
servers.py`: the suite's 1.10.1, which sends no ETag, and 1.11.0, which answers conditional loads with
304) and moto's Glue. Each catalog's tables are measured once; then 1% of
them get a real PyIceberg append through that catalog, and a new `StatusTracker` seeded with the earlier
statuses (as a health-sync run process is) re-statuses the fleet. Measured: wall and CPU seconds of that
steady refresh, how many tables were loaded (counted on the catalog object: its `load_table` calls, for
REST its session's loadTable answers 200) and how many loadTable requests were answered 304. Asserted:
no failure, and the changed tables, and only they, were read (statuses equal to a full load are the
tests' part: `tests/config/catalogs/test_change_detection.py`).

    .venv/bin/python bench/change_detection.py [--quick] [--tables N] [--kinds lake,rest,rest_etag,glue]
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
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
from icepack_dagster.iceberg.incremental_status.status_tracker import StatusTracker  # noqa: E402
from tests import tiers  # noqa: E402
from tests.config.catalogs.servers import (  # noqa: E402
    ETAG_REST_SERVER,
    SUITE_REST_SERVER,
    moto_server,
    rest_catalog_server,
)

KINDS = ("lake", "rest", "rest_etag", "glue")


class CountingLoads(CatalogSet):
    """The benchmark's catalogs, each opened catalog's `load_table` counted, and for REST catalogs the
    status of each loadTable answer its session receives (conditional loads bypass `load_table`)."""

    def __init__(self, settings: IcepackSettings) -> None:
        super().__init__(settings)
        self.loads = 0
        self.answers: Counter[int] = Counter()

    def _open_uncached(self, name: str) -> Any:
        catalog = super()._open_uncached(name)
        load = catalog.load_table

        def counted(identifier: Any) -> Any:
            self.loads += 1
            return load(identifier)

        def answered(response: Any, *args: Any, **kwargs: Any) -> None:
            if response.request.method == "GET" and "/tables/" in response.request.path_url:
                self.answers[response.status_code] += 1

        catalog.load_table = counted
        session = getattr(catalog, "_session", None)
        if session is not None:
            session.hooks["response"].append(answered)
        return catalog


def main() -> None:
    parser_args = arguments(
        __doc__.splitlines()[0],
        lambda parser: (
            parser.add_argument("--tables", type=int, help="fleet size (default 1,000)"),
            parser.add_argument("--kinds", default=",".join(KINDS),
                                help=f"catalogs measured, in order (default {','.join(KINDS)})"),
        ),
    )
    kinds = parser_args.kinds.split(",")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"--kinds: unknown {unknown}; choose among {','.join(KINDS)}")
    bench = Bench(parser_args.workdir)
    count = parser_args.tables or (100 if parser_args.quick else 1_000)
    print(f"Change detection benchmark, {count:,} tables, 1% changed; {machine()}")
    lake_keys = _tables.fleet(bench, count, prefix="detect")
    locations = bench.catalogs.metadata_locations("lake", [k.identifier for k in lake_keys])
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        os.environ[name] = value
    servers = Path(tempfile.mkdtemp(prefix="servers-", dir=bench.workdir))  # fresh catalogs each run
    jar_cache = bench.settings.spark.jar_cache
    tiers.entering(frozenset({"jvm_servers"}))  # the servers' guard is the test suite's: this run starts them
    for kind in ("rest", "rest_etag"):
        (servers / kind).mkdir()
    with (
        rest_catalog_server(jar_cache, servers / "rest", SUITE_REST_SERVER) as rest_url,
        rest_catalog_server(jar_cache, servers / "rest_etag", ETAG_REST_SERVER) as etag_url,
        moto_server(servers, days_behind=0) as moto_url,
    ):
        settings = load_settings(
            home=bench.workdir / "home",
            catalogs={
                "lake": {"kind": "embedded"},
                "rest": {"kind": "rest", "uri": rest_url, "warehouse": "lake"},
                "rest_etag": {"kind": "rest", "uri": etag_url, "warehouse": "lake"},
                "glue": {"kind": "glue", "region": "us-east-1", "endpoint": moto_url},
            },
            status_workers=1,
        )
        rows = []
        for kind in kinds:
            rows.append(steady_sync(settings, kind, lake_keys, locations))
            print(f"{kind}: {rows[-1]}", flush=True)
    table(
        f"Steady re-status of {count:,} tables, {max(1, count // 100)} changed by a real append, "
        "a new tracker seeded with the earlier statuses (as a health-sync run)",
        ["catalog", "wall s", "cpu s", "tables loaded", "answered 304", "tables read", "unchanged",
         "first (all read) s", "load at start"],
        rows,
    )


def steady_sync(
    settings: IcepackSettings, kind: str, lake_keys: list[TableKey], locations: dict[Any, str]
) -> list[Any]:
    """One catalog kind's first measurement and steady refresh after 1% changed."""
    load = os.getloadavg()[0]
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
    loaded = counting.answers[200] if kind.startswith("rest") else counting.loads
    counts = [loaded, counting.answers[304], len(steady.read), len(steady.unchanged)]
    return [kind, wall, cpu, *counts, first_wall, load]


if __name__ == "__main__":
    main()
