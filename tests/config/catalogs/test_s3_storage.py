"""Contract: tables on an S3 API (moto's server, holding objects written days ago by its clock) are
measured by PyIceberg through its S3 FileIO and maintained by Spark through Iceberg's S3FileIO, every
action, with contents unchanged on main and on every branch and tag. Orphan removal on `s3://`
deletes only the object nothing references: every object a snapshot, branch or tag reaches is kept,
and a neighbour table whose location merely starts with the same characters keeps every object.
Where the listing cannot be trusted, it refuses and deletes nothing: a table location written as
`s3a://` beside `s3://` references, references into another bucket, or another table's files inside
this table's location. Iceberg's own 24-hour guard is never relaxed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.config.catalogs.catalog_testkit import EAGER_MOR, EVERY_ACTION, secrets_in
from tests.config.catalogs.conftest import S3_SECRET_ACCESS_KEY, SessionsWithCatalogs, s3_catalog, s3_client
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import (
    arrow_fingerprint,
    contents_by_version,
    kept_versions,
    make_table,
    table_fingerprint,
)

pytestmark = pytest.mark.spark

ICEPACK = str(Path(sys.executable).parent / "icepack")
THREE_DAYS_AGO = (datetime.now(UTC) - timedelta(days=3)).isoformat()


class S3Lake:
    """One test's catalog `s3lake` over a fresh bucket, with an engine and Spark sessions on it."""

    def __init__(
        self, spark: Any, settings: IcepackSettings, database: str, endpoint: str, bucket: str, home: Path
    ):
        self.bucket, self.s3 = bucket, s3_client(endpoint)
        catalog = s3_catalog(database, endpoint, f"s3://{bucket}/lake")
        self.settings = load_settings(
            home=home, catalogs={"s3lake": catalog}, spark=settings.spark.model_dump()
        )
        self.catalogs = CatalogSet(self.settings)
        self.sessions = SessionsWithCatalogs(spark, self.settings)
        history = HistoryStore(f"sqlite:///{home / 'state.db'}")
        self.engine = Engine(
            self.settings, self.catalogs, spark_provider=lambda: self.sessions, history=history
        )

    def key(self, name: str, namespace: str | None = None) -> TableKey:
        return TableKey(catalog="s3lake", namespace=(namespace or f"ns_{uuid.uuid4().hex[:8]}",), name=name)

    def objects(self, prefix: str = "") -> set[str]:
        """Every object key in the bucket under `prefix`, listed by S3 itself."""
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {item["Key"] for page in pages for item in page.get("Contents", [])}

    def plant(self, next_to: str, name: str) -> str:
        """An unreferenced copy of a real object, beside it: exactly what an orphan looks like."""
        key = next_to.rsplit("/", 1)[0] + "/" + name
        self.s3.copy_object(Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": next_to})
        return key

    def remove_orphans(self, key: TableKey) -> Any:
        recommendation = make_recommendation(
            make_action(MaintenanceAction.REMOVE_ORPHAN_FILES, older_than=THREE_DAYS_AGO), table=key.text
        )
        return self.engine.maintain(key, recommendation=recommendation)


@pytest.fixture
def lake(spark, settings, s3_catalog_database, s3_server, s3_bucket, tmp_path) -> S3Lake:  # type: ignore[no-untyped-def]
    return S3Lake(spark, settings, s3_catalog_database, s3_server, s3_bucket, tmp_path / "home")


def bucket_key(location: str) -> str:
    return location.split("://", 1)[1].split("/", 1)[1]


def test_every_action_on_s3_keeps_contents_and_every_referenced_object(lake: S3Lake, caplog, capfd) -> None:  # type: ignore[no-untyped-def]
    key = lake.key("events")
    make_table(lake.catalogs, key, commits=10, properties=EAGER_MOR)
    table = lake.catalogs.get("s3lake").load_table(key.identifier)
    location = table.location()
    neighbour_key = lake.key("events_archive", namespace=key.namespace[0])
    make_table(lake.catalogs, neighbour_key, commits=2, location=f"{location}_archive")
    neighbour = lake.catalogs.get("s3lake").load_table(neighbour_key.identifier)
    session = lake.sessions.newSession()
    q, nq = qualified_table("s3lake", key), qualified_table("s3lake", neighbour_key)
    for doomed in (1, 25):  # position delete files, so every action has work
        session.sql(f"DELETE FROM {q} WHERE id = {doomed}")
    session.sql(f"ALTER TABLE {q} CREATE TAG before_maintenance")
    session.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    session.sql(f"INSERT INTO {q}.branch_audit VALUES (500, 0, 'branch only')")
    data_object = sorted(o for o in lake.objects(bucket_key(location) + "/data/") if o.endswith(".parquet"))[
        0
    ]
    orphan = lake.plant(data_object, "orphan.parquet")
    neighbour_objects = lake.objects(bucket_key(neighbour.location()) + "/")
    before, versions = table_fingerprint(session, q), contents_by_version(session, q)
    neighbour_before = table_fingerprint(session, nq)
    read_before = arrow_fingerprint(lake.catalogs.get("s3lake").load_table(key.identifier))
    status = lake.engine.status(key)
    unreferenced = lake.engine.unreferenced_files(key)  # PyIceberg's own listing, through its S3 FileIO
    assert location.startswith(f"s3://{lake.bucket}/") and neighbour.location().startswith(location)
    assert status.live_data_files == 10 and status.live_delete_files == 2
    assert [bucket_key(f.location) for f in unreferenced.removable] == [orphan] and not unreferenced.young

    recommendation = lake.engine.recommend(key)
    report = lake.engine.maintain(key, recommendation=recommendation)

    assert [a.action for a in recommendation.actions] == EVERY_ACTION
    ran = [r.status for r in report.results if r.action in EVERY_ACTION]  # statistics: skipped, off
    assert ran == ["succeeded"] * 5, report.first_error
    assert report.results[-1].impact.orphan_files_removed == 1
    check = lake.sessions.newSession()
    assert orphan not in lake.objects()
    referenced = {bucket_key(p) for p in _referenced(check, q)}
    assert referenced <= lake.objects(bucket_key(location) + "/")
    assert table_fingerprint(check, q) == before
    assert kept_versions(versions, contents_by_version(check, q))
    assert arrow_fingerprint(lake.catalogs.get("s3lake").load_table(key.identifier)) == read_before
    assert lake.objects(bucket_key(neighbour.location()) + "/") == neighbour_objects
    assert table_fingerprint(check, nq) == neighbour_before
    out, err = capfd.readouterr()
    assert not secrets_in(
        "\n".join([out, err, caplog.text, report.model_dump_json()]), (S3_SECRET_ACCESS_KEY,)
    )


def _referenced(session: Any, q: str) -> set[str]:
    queries = (
        f"SELECT file_path FROM {q}.all_files",
        f"SELECT path FROM {q}.all_manifests",
        f"SELECT manifest_list FROM {q}.snapshots",
        f"SELECT file FROM {q}.metadata_log_entries",
    )
    return {row[0] for query in queries for row in session.sql(query).collect()}


def _moved(lake: S3Lake, name: str, new_location: Any) -> tuple[TableKey, str]:
    """A table with three commits and an old orphan beside its data, whose location is then rewritten
    by `new_location(old)` (the way a table is re-pointed by hand); (key, orphan object)."""
    key = lake.key(name)
    make_table(lake.catalogs, key, commits=3)
    table = lake.catalogs.get("s3lake").load_table(key.identifier)
    data_object = sorted(o for o in lake.objects(bucket_key(table.location()) + "/data/"))[0]
    orphan = lake.plant(data_object, "orphan.parquet")
    session = lake.sessions.newSession()
    session.sql(
        f"ALTER TABLE {qualified_table('s3lake', key)} SET LOCATION '{new_location(table.location())}'"
    )
    return key, orphan


def _refused_without_deleting(lake: S3Lake, key: TableKey, objects: Any, expected: str) -> None:
    objects_before = objects()
    contents_before = arrow_fingerprint(lake.catalogs.get("s3lake").load_table(key.identifier))

    report = lake.remove_orphans(key)

    [result] = report.results
    assert result.status == "failed" and result.statements == ()
    assert key.text in (result.error or "") and "nothing was deleted" in (result.error or "")
    assert expected in (result.error or ""), result.error
    assert objects() == objects_before  # the orphan too: nothing at all is deleted
    assert arrow_fingerprint(lake.catalogs.get("s3lake").load_table(key.identifier)) == contents_before


def test_an_s3a_location_beside_s3_references_refuses_and_deletes_nothing(lake: S3Lake) -> None:
    key, orphan = _moved(lake, "mixed_schemes", lambda old: "s3a://" + old.removeprefix("s3://"))

    assert lake.catalogs.get("s3lake").load_table(key.identifier).location().startswith("s3a://")
    _refused_without_deleting(lake, key, lake.objects, "another scheme or authority")
    assert orphan in lake.objects()


def test_a_location_in_another_bucket_refuses_and_deletes_nothing(lake: S3Lake) -> None:
    other = f"{lake.bucket}-b"
    lake.s3.create_bucket(Bucket=other)
    key, orphan = _moved(
        lake, "other_bucket", lambda old: old.replace(f"s3://{lake.bucket}/", f"s3://{other}/")
    )
    location = lake.catalogs.get("s3lake").load_table(key.identifier).location()
    for item in lake.objects(
        bucket_key(location)
    ):  # the same files in the other bucket, as a copy leaves them
        lake.s3.copy_object(Bucket=other, Key=item, CopySource={"Bucket": lake.bucket, "Key": item})

    def both_buckets() -> tuple[set[str], set[str]]:
        pages = lake.s3.get_paginator("list_objects_v2").paginate(Bucket=other)
        return lake.objects(), {item["Key"] for page in pages for item in page.get("Contents", [])}

    assert location.startswith(f"s3://{other}/")
    _refused_without_deleting(lake, key, both_buckets, "another scheme or authority")
    assert orphan in lake.objects()


def test_another_table_inside_the_location_refuses_and_deletes_nothing(lake: S3Lake) -> None:
    outer_key = lake.key("outer")
    make_table(lake.catalogs, outer_key, commits=2)
    outer = lake.catalogs.get("s3lake").load_table(outer_key.identifier)
    inner_key = lake.key("inner", namespace=outer_key.namespace[0])
    make_table(lake.catalogs, inner_key, commits=2, location=f"{outer.location()}/nested")
    inner_before = arrow_fingerprint(lake.catalogs.get("s3lake").load_table(inner_key.identifier))

    _refused_without_deleting(lake, outer_key, lake.objects, "another table's metadata lies inside")
    assert arrow_fingerprint(lake.catalogs.get("s3lake").load_table(inner_key.identifier)) == inner_before


def test_icepack_maintains_an_s3_table_configured_as_the_docs_show(
    lake: S3Lake, s3_server: str, tmp_path: Path
) -> None:
    """The user's path: `icepack maintain` in its own process and its own Spark session (the AWS bundle
    loaded because the catalog has an `s3` block), configured by YAML with the S3 secret in the
    environment variable the docs name; nothing secret in its output."""
    key = lake.key("cli_events")
    make_table(lake.catalogs, key, commits=8, properties=EAGER_MOR)
    before = arrow_fingerprint(lake.catalogs.get("s3lake").load_table(key.identifier))
    catalog = lake.settings.catalogs["s3lake"].model_dump(mode="json")
    del catalog["s3"]["secret_access_key"], catalog["password"]
    config = tmp_path / "icepack.yaml"
    config.write_text(yaml.safe_dump({"catalogs": {"s3lake": catalog}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ICEPACK_", "AWS_"))}
    env |= {
        "ICEPACK_CONFIG": str(config),
        "ICEPACK_HOME": str(tmp_path / "cli_home"),
        "ICEPACK_CATALOGS__S3LAKE__S3__SECRET_ACCESS_KEY": S3_SECRET_ACCESS_KEY,
        "ICEPACK_SPARK__MASTER": "local[2]",
        "ICEPACK_SPARK__DRIVER_MEMORY": "1g",
        "ICEPACK_SPARK__JAR_CACHE": str(lake.settings.spark.jar_cache),
    }

    done = subprocess.run(
        [ICEPACK, "maintain", key.dotted, "--json"], env=env, capture_output=True, text=True, timeout=600
    )

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["outcome"] == "succeeded" and "rewrite_data_files" in {
        r["action"] for r in report["results"]
    }
    table = lake.catalogs.get("s3lake").load_table(key.identifier)
    assert len(table.inspect.files()) < 8 and arrow_fingerprint(table) == before
    assert not secrets_in(done.stdout + done.stderr, (S3_SECRET_ACCESS_KEY,))
