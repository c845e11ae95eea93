"""Contract: a table in a Glue catalog (moto's Glue API, tables on its S3 API) is discovered, measured
and fully maintained through PyIceberg's Glue catalog and Iceberg's `GlueCatalog` in Spark, both
pointed at the emulator by the catalog's `endpoint` and `s3` settings; contents unchanged on main and
on every branch and tag. Glue's credentials come from the environment, as with workload identity: the
Python process's variables for PyIceberg, the JVM's system properties for Spark.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.config.catalogs.catalog_testkit import EAGER_MOR, EVERY_ACTION, secrets_in
from tests.config.catalogs.conftest import (
    S3_ACCESS_KEY_ID,
    S3_REGION,
    S3_SECRET_ACCESS_KEY,
    SessionsWithCatalogs,
    s3_storage,
)
from tests.tables_testkit import (
    arrow_fingerprint,
    contents_by_version,
    kept_versions,
    make_table,
    table_fingerprint,
    table_key,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def aws_environment(spark, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Glue credentials the way the default AWS credential chains find them."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET_ACCESS_KEY,
        "AWS_DEFAULT_REGION": S3_REGION,
    }.items():
        monkeypatch.setenv(name, value)
    system = spark._jvm.java.lang.System  # type: ignore[attr-defined]
    system.setProperty("aws.accessKeyId", S3_ACCESS_KEY_ID)
    system.setProperty("aws.secretAccessKey", S3_SECRET_ACCESS_KEY)
    yield
    system.clearProperty("aws.accessKeyId")
    system.clearProperty("aws.secretAccessKey")


def glue_settings(settings: IcepackSettings, home: Path, endpoint: str, bucket: str) -> IcepackSettings:
    glue = {
        "kind": "glue",
        "region": S3_REGION,
        "endpoint": endpoint,
        "warehouse": f"s3://{bucket}/glue",
        "s3": s3_storage(endpoint),
    }
    return load_settings(home=home, catalogs={"glue": glue}, spark=settings.spark.model_dump())


def test_a_glue_table_is_discovered_measured_and_fully_maintained(
    spark: Any,
    settings: IcepackSettings,
    s3_server: str,
    s3_bucket: str,
    aws_environment: None,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    glue = glue_settings(settings, tmp_path / "home", s3_server, s3_bucket)
    catalogs = CatalogSet(glue)
    key = table_key(f"db_{uuid.uuid4().hex[:8]}", "events", "glue")
    make_table(catalogs, key, commits=10, properties=EAGER_MOR)
    table = catalogs.get("glue").load_table(key.identifier)
    sessions = SessionsWithCatalogs(spark, glue)
    session = sessions.newSession()
    q = qualified_table("glue", key)
    for doomed in (1, 25):
        session.sql(f"DELETE FROM {q} WHERE id = {doomed}")
    session.sql(f"ALTER TABLE {q} CREATE TAG before_maintenance")
    before, versions = table_fingerprint(session, q), contents_by_version(session, q)
    read_before = arrow_fingerprint(catalogs.get("glue").load_table(key.identifier))
    engine = Engine(
        glue,
        catalogs,
        spark_provider=lambda: sessions,
        history=HistoryStore(f"sqlite:///{tmp_path / 's.db'}"),
    )

    discovered = engine.discover()
    status = engine.status(key)
    recommendation = engine.recommend(key, status)
    report = engine.maintain(key, recommendation=recommendation)

    assert key in discovered.tables and table.location().startswith(f"s3://{s3_bucket}/glue/")
    assert status.live_data_files == 10 and status.live_delete_files == 2
    assert [a.action for a in recommendation.actions] == EVERY_ACTION
    ran = [r.status for r in report.results if r.action in EVERY_ACTION]  # statistics: skipped, off
    assert ran == ["succeeded"] * 5, report.first_error
    after = engine.status(key)
    assert after.live_data_files < 10 and after.live_delete_files == 0, after
    check = sessions.newSession()
    assert table_fingerprint(check, q) == before
    assert kept_versions(versions, contents_by_version(check, q))
    assert arrow_fingerprint(catalogs.get("glue").load_table(key.identifier)) == read_before
    out, err = capfd.readouterr()
    shown = "\n".join([out, err, caplog.text, report.model_dump_json(), glue.model_dump_json(), repr(glue)])
    assert not secrets_in(shown, (S3_SECRET_ACCESS_KEY,))
