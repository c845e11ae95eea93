"""Scenario 12, catalog outage, with catalogs made really unavailable on a real instance with
PostgreSQL storage:

- an embedded catalog whose SQLite file is gone (a volume not mounted: the catalog opens empty) and a
  PostgreSQL-backed catalog whose database was renamed away;
- discovery removes none of their partitions and says why (an empty catalog is read as an outage);
- health sync marks their tables `unknown` with the error (never healthy), while a table of a working
  catalog is still measured;
- the maintenance sensor launches nothing for them and forgets them from its pending set;
- once the catalogs are back, every table is there with the same contents (row count and checksum).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.catalogs import EmbeddedCatalogSettings, PostgresCatalogSettings
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import MAINTENANCE_POOL, maintenance_tags
from icepack_dagster.domain.decisions.sensor_cursors import MaintenanceCursor
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_connection
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    latest_health,
    run_health_sync,
    small_file_table,
)
from tests.factories import settings_with_platform
from tests.tables_testkit import arrow_fingerprint

pytestmark = pytest.mark.postgres


@pytest.fixture
def catalog_database() -> Iterator[list[str]]:
    """A PostgreSQL database for one Iceberg catalog; [current name] (the test renames it)."""
    name = [f"icepack_down_{uuid.uuid4().hex[:10]}"]
    admin = _admin_connection()
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name[0]}"')
    yield name
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name[0]}" WITH (FORCE)')
    admin.close()


def _rename_database(old: str, new: str) -> None:
    admin = _admin_connection()
    with admin.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (old,))
        cursor.execute(f'ALTER DATABASE "{old}" RENAME TO "{new}"')
    admin.close()


def _move_sqlite(db: Path, suffix_from: str, suffix_to: str) -> None:
    for extra in ("", "-wal", "-shm"):
        source = db.with_name(db.name + suffix_from + extra)
        if source.exists():
            source.rename(db.with_name(db.name + suffix_to + extra))


def _evaluate_inside_maintenance(defs: dg.Definitions, instance: dg.DagsterInstance) -> dg.SensorResult:
    """The maintenance sensor evaluated while another table's maintenance run holds the only slot,
    so the unhealthy tables are kept pending in the cursor. Like every maintenance run it needs the
    maintenance pool, which is how the sensor finds runs in flight."""
    seen: list[dg.SensorResult] = []

    @dg.asset(pool=MAINTENANCE_POOL)
    def other_maintenance() -> None:
        seen.append(evaluate_sensor(defs, "maintenance_sensor", instance))

    assert dg.materialize([other_maintenance], instance=instance, tags=maintenance_tags("lake.x.y")).success
    return seen[0]


def test_outage_removes_nothing_marks_unknown_and_launches_nothing(
    settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    catalog_database: list[str],
    pg_instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    side_db = tmp_path / "side" / "catalog.db"
    outage = settings.model_copy(
        update={
            "catalogs": {
                "lake": settings.catalogs["lake"],
                "side": EmbeddedCatalogSettings(path=side_db, warehouse=tmp_path / "side" / "warehouse"),
                "down": PostgresCatalogSettings(
                    host=PG_HOST,
                    port=PG_PORT,
                    database=catalog_database[0],
                    user=PG_USER,
                    warehouse=str(tmp_path / "down_warehouse"),
                ),
            },
            "include": [f"lake.{namespace}.*", "side.*", "down.*"],
        }
    )
    own = CatalogSet(outage)
    small_file_table(catalogs.get("lake"), f"{namespace}.fine", appends=1)
    fingerprints = {}
    for catalog in ("side", "down"):
        own.get(catalog).create_namespace("sales")
        table = small_file_table(own.get(catalog), "sales.orders", appends=10)
        fingerprints[f"{catalog}.sales.orders"] = arrow_fingerprint(table)
        own.get(catalog).close()
    defs = build_definitions(settings_with_platform(outage, PlatformSettings(max_maintenance_in_flight=1)))
    instance = pg_instance

    discovered = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    partitions = list(instance.get_dynamic_partitions(PARTITIONS_NAME))
    assert sorted(partitions) == sorted([f"lake.{namespace}.fine", *fingerprints])
    assert run_health_sync(defs, instance, partitions).success
    for table in fingerprints:
        assert latest_health(instance, table).state is HealthState.CRITICAL
    waiting = _evaluate_inside_maintenance(defs, instance)
    assert not waiting.run_requests
    assert set(MaintenanceCursor.model_validate_json(waiting.cursor).pending) == set(fingerprints)

    _move_sqlite(side_db, "", ".unmounted")  # the volume is gone: the catalog reopens empty
    empty = evaluate_sensor(defs, "iceberg_table_discovery", instance, cursor=discovered.cursor)
    assert isinstance(empty, dg.SkipReason), empty
    assert "catalog 'side' lists no managed table" in empty.skip_message
    assert "none removed" in empty.skip_message
    assert sorted(instance.get_dynamic_partitions(PARTITIONS_NAME)) == sorted(partitions)

    _rename_database(catalog_database[0], catalog_database[0] + "_gone")
    catalog_database[0] += "_gone"
    down = evaluate_sensor(defs, "iceberg_table_discovery", instance, cursor=discovered.cursor)
    assert isinstance(down, dg.SkipReason), down
    assert "incomplete" in down.skip_message and "down" in down.skip_message
    assert sorted(instance.get_dynamic_partitions(PARTITIONS_NAME)) == sorted(partitions)

    assert run_health_sync(defs, instance, partitions).success
    for table in fingerprints:
        health = latest_health(instance, table)
        assert health.state is HealthState.UNKNOWN, f"{table} is {health.state} during the outage"
        assert health.error and table.split(".")[0] in health.error
    assert latest_health(instance, f"lake.{namespace}.fine").state is HealthState.HEALTHY

    quiet = evaluate_sensor(defs, "maintenance_sensor", instance, cursor=waiting.cursor)
    assert not quiet.run_requests
    assert MaintenanceCursor.model_validate_json(quiet.cursor).pending == {}
    runs = instance.get_run_records(filters=dg.RunsFilter(job_name="maintenance"))
    assert not runs

    _rename_database(catalog_database[0], catalog_database[0].removesuffix("_gone"))
    catalog_database[0] = catalog_database[0].removesuffix("_gone")
    _move_sqlite(side_db, "", ".recreated")
    _move_sqlite(side_db, ".unmounted", "")
    back = evaluate_sensor(defs, "iceberg_table_discovery", instance, cursor=discovered.cursor)
    assert isinstance(back, dg.SkipReason) and "already match" in back.skip_message
    restored = CatalogSet(outage)
    for table, fingerprint in fingerprints.items():
        catalog, identifier = table.split(".", 1)
        assert arrow_fingerprint(restored.get(catalog).load_table(identifier)) == fingerprint
