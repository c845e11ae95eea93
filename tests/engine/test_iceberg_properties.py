"""Contract: the table's own Iceberg properties bound what icepack does, on real tables through real
Spark procedures.

- Retention never drops below what the table's `history.expire.*` keeps, whatever icepack's defaults or
  the operator's policy file say; only the table's owner, through `icepack.snapshot.*`, may keep less.
- `gc.enabled` is read exactly as Iceberg reads it: every spelling Iceberg takes as false gets no
  destructive action (and Iceberg itself refuses one), never a failure, never a quarantine; every
  spelling Iceberg takes as true gets them.
- A table whose snapshots are all on a branch (main has none) is judged by its refs: expiry and the
  orphan sweep run on it and keep each branch's newest snapshots and every tag.
Every remaining snapshot, branch and tag reads back as it did before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.recommendation.recommender import gc_disabled_reason
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.engine.safety_testkit import (
    files_under,
    plant_orphan,
    referenced_files,
    table_dir,
    wait_past_newest_snapshot,
)
from tests.tables_testkit import SCHEMA, contents_by_version, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

A = MaintenanceAction
DESTRUCTIVE = [A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES]
MIN_KEEP, MAX_AGE = "history.expire.min-snapshots-to-keep", "history.expire.max-snapshot-age-ms"
V2 = {"format-version": "2"}


@pytest.fixture
def eager(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    """An engine whose operator policy file expires everything but the newest 2 snapshots."""
    policy = tmp_path / "policy.yaml"
    policy.write_text('rules:\n  - match: "*"\n    snapshot_max_age_hours: 0\n    snapshot_retain_last: 2\n')
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    configured = settings.model_copy(update={"policy_file": policy})
    return Engine(configured, catalogs, spark_provider=lambda: spark, history=history)


def _snapshot_count(spark: SparkSession, key: TableKey) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {qualified_table(key.catalog, key)}.snapshots").first()[0])


def _assert_versions_unchanged(
    spark: SparkSession, key: TableKey, versions: dict[str, tuple[int, str]]
) -> None:
    after = contents_by_version(spark, key)
    assert after == {version: versions[version] for version in after}  # each reads as it did


@pytest.mark.parametrize(
    ("owner", "kept", "catalog"),
    [
        ({MIN_KEEP: "8"}, 8, "lake"),  # stricter than the policy file's 2: Iceberg alone keeps 8
        ({MIN_KEEP: "8"}, 8, "pg"),  # the same on the PostgreSQL catalog
        ({MIN_KEEP: "1"}, 2, "lake"),  # looser: the policy file's 2 stand
        ({MIN_KEEP: "8", "icepack.snapshot.retain-last": "3"}, 3, "lake"),  # the owner chose fewer
    ],
)
def test_expiry_keeps_at_least_what_the_tables_own_retention_keeps(
    spark: SparkSession,
    catalogs: CatalogSet,
    eager: Engine,
    namespace: str,
    owner: dict[str, str],
    kept: int,
    catalog: str,
) -> None:
    key = make_table(catalogs, table_key(namespace, "retained", catalog), commits=12, properties=V2 | owner)
    q = qualified_table(catalog, key)
    before, versions = table_fingerprint(spark, q), contents_by_version(spark, key)
    wait_past_newest_snapshot(catalogs, key)

    report = eager.maintain(key, only=[A.EXPIRE_SNAPSHOTS])

    [result] = report.results
    assert result.status == "succeeded", result.error
    assert f"retain_last => {kept}" in result.statements[-1]
    assert _snapshot_count(spark, key) == kept
    assert table_fingerprint(spark, q) == before
    _assert_versions_unchanged(spark, key, versions)


def test_the_tables_own_snapshot_age_is_kept_unless_the_owner_chose_less(
    spark: SparkSession, catalogs: CatalogSet, eager: Engine, engine: Engine, namespace: str
) -> None:
    hour = {MAX_AGE: "3600000"}  # Iceberg keeps an hour: longer than the policy file's 0 h
    young = make_table(catalogs, table_key(namespace, "young"), commits=6, properties=V2 | hour)
    effective = eager.policy(young, eager.status(young).properties)
    assert effective.policy.snapshot_max_age_hours == 1.0
    assert MAX_AGE in effective.sources["snapshot_max_age_hours"]
    skipped = {s.action: s.reason for s in eager.recommend(young).skipped}
    assert "within snapshot_max_age_hours 1" in skipped[A.EXPIRE_SNAPSHOTS]
    report = eager.maintain(young, only=[A.EXPIRE_SNAPSHOTS])
    assert [r.status for r in report.results] == ["skipped"] and _snapshot_count(spark, young) == 6

    # an Iceberg age shorter than icepack's default never shortens icepack's own retention
    brief = make_table(catalogs, table_key(namespace, "brief"), commits=3, properties=V2 | {MAX_AGE: "0"})
    assert engine.policy(brief, engine.status(brief).properties).policy.snapshot_max_age_hours == 120.0

    chosen = hour | {"icepack.snapshot.max-age-hours": "0"}
    owned = make_table(catalogs, table_key(namespace, "owned"), commits=6, properties=V2 | chosen)
    versions = contents_by_version(spark, owned)
    wait_past_newest_snapshot(catalogs, owned)
    [result] = eager.maintain(owned, only=[A.EXPIRE_SNAPSHOTS]).results
    assert result.status == "succeeded", result.error
    assert _snapshot_count(spark, owned) == 2
    _assert_versions_unchanged(spark, owned, versions)


@pytest.mark.parametrize(
    ("value", "catalog"),
    [("no", "lake"), ("no", "pg"), ("true ", "lake"), ("1", "lake"), ("FALSE", "lake")],
)
def test_gc_disabled_in_any_spelling_is_skipped_never_failed_nor_quarantined(
    spark: SparkSession, catalogs: CatalogSet, eager: Engine, namespace: str, value: str, catalog: str
) -> None:
    key = make_table(
        catalogs, table_key(namespace, "no_gc", catalog), commits=6, properties=V2 | {"gc.enabled": value}
    )
    q = qualified_table(catalog, key)
    orphan = plant_orphan(catalogs, key)
    files, versions = files_under(table_dir(catalogs, key)), contents_by_version(spark, key)

    for _ in range(3):  # as many runs as quarantine takes
        report = eager.maintain(key, only=DESTRUCTIVE)
        assert {(r.action, r.status, r.reason) for r in report.results} == {
            (action, "skipped", gc_disabled_reason(value)) for action in DESTRUCTIVE
        }
    history = eager.history(key)
    assert history.consecutive_failures == 0 and not history.quarantined
    assert files_under(table_dir(catalogs, key)) == files and orphan.exists()
    # Iceberg itself reads the spelling the same way: it refuses to expire
    with pytest.raises(Exception, match="GC is disabled"):
        spark.sql(
            f"CALL {catalog}.system.expire_snapshots(table => '{key.dotted}', retain_last => 1)"
        ).collect()
    _assert_versions_unchanged(spark, key, versions)
    assert table_fingerprint(spark, q)[0] == 60


@pytest.mark.parametrize("value", ["TRUE", "tRuE"])
def test_gc_enabled_in_any_letter_case_gets_expiry_and_the_orphan_sweep(
    spark: SparkSession, catalogs: CatalogSet, eager: Engine, namespace: str, value: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "gc"), commits=6, properties=V2 | {"gc.enabled": value})
    q = qualified_table("lake", key)
    orphan = plant_orphan(catalogs, key)
    before = table_fingerprint(spark, q)
    wait_past_newest_snapshot(catalogs, key)

    report = eager.maintain(key, only=DESTRUCTIVE)

    assert {r.action: r.status for r in report.results} == dict.fromkeys(DESTRUCTIVE, "succeeded")
    assert _snapshot_count(spark, key) == 2 and not orphan.exists()
    assert referenced_files(spark, catalogs, key) <= files_under(table_dir(catalogs, key))
    assert table_fingerprint(spark, q) == before


@pytest.mark.parametrize("catalog", ["lake", "pg"])
def test_a_branch_only_table_gets_expiry_and_the_orphan_sweep(
    spark: SparkSession, catalogs: CatalogSet, eager: Engine, namespace: str, catalog: str
) -> None:
    key = TableKey(catalog=catalog, namespace=(namespace,), name="branch_only")
    catalogs.get(catalog).create_namespace_if_not_exists(key.namespace)
    catalogs.get(catalog).create_table(key.identifier, SCHEMA, properties=V2 | {"write.wap.enabled": "true"})
    writer = spark.newSession()  # write-audit-publish: writes go to branch audit, created by the first one
    writer.sql("SET spark.wap.branch=audit")
    for start in range(0, 80, 10):
        writer.sql(
            f"INSERT INTO {qualified_table(catalog, key)} "
            f"SELECT id, 0, concat('row-', id) FROM range({start}, {start + 10})"
        )
    q = qualified_table(catalog, key)
    first = spark.sql(f"SELECT snapshot_id FROM {q}.snapshots ORDER BY committed_at LIMIT 1").first()[0]
    spark.sql(f"ALTER TABLE {q} CREATE TAG oldest AS OF VERSION {first}")
    wait_past_newest_snapshot(catalogs, key)  # older_than is whole seconds: expiry is due only then
    status = eager.status(key)
    assert status.snapshot_id is None and status.snapshot_count == 8 and status.branch_count == 1
    assert {A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES} <= {a.action for a in eager.recommend(key).actions}
    orphan = plant_orphan(catalogs, key)
    versions = contents_by_version(spark, key)

    report = eager.maintain(key, only=DESTRUCTIVE)

    assert {r.action: r.status for r in report.results} == dict.fromkeys(DESTRUCTIVE, "succeeded")
    assert _snapshot_count(spark, key) == 3  # the branch's newest 2 and the tagged one
    assert not orphan.exists()
    assert referenced_files(spark, catalogs, key) <= files_under(table_dir(catalogs, key))
    _assert_versions_unchanged(spark, key, versions)
    assert {"'audit'", "'oldest'"} <= set(contents_by_version(spark, key))
    assert contents_by_version(spark, key)["'audit'"][0] == 80
