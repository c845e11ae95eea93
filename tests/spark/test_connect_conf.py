"""Contract: for an `sc://` master (Spark Connect) a session is sent runtime SQL settings only: the
catalogs, the time zone and `spark.sql.*` from `spark.conf`; never jars, SQL extensions, driver or
master settings, which belong to the server. Resolving them needs no local jar. Secrets stay masked in
`describe_spark_conf`. Settings a Connect session cannot take are refused at start-up, naming them.
A batch run's sessions on a Connect server switch Spark's code generation off (`connect_batch_conf`), unless
`spark.connect_batch_codegen` keeps it or `spark.conf` sets the key itself; a classic batch keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.spark.session import (
    INTERPRETED_CONF,
    connect_batch_conf,
    describe_spark_conf,
    spark_conf,
)

SERVER_SIDE = ("spark.master", "spark.app.name", "spark.jars", "spark.sql.extensions")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("ICEPACK_HOME", str(tmp_path / "home"))


def connect_settings(tmp_path: Path, **spark: object) -> IcepackSettings:
    return load_settings(
        catalogs={
            "lake": {"kind": "embedded"},
            "pg": {
                "kind": "postgres",
                "database": "lakehouse",
                "user": "icepack",
                "password": "pg-s3cr3t",
                "warehouse": str(tmp_path / "pg"),
            },
        },
        spark={"master": "sc://spark-connect.spark:15002", **spark},
    )


def test_a_connect_session_gets_runtime_sql_settings_only(tmp_path: Path) -> None:
    settings = connect_settings(tmp_path, conf={"spark.sql.shuffle.partitions": "64"})
    conf = spark_conf(settings)
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.shuffle.partitions"] == "64"
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.pg.uri"].startswith("jdbc:postgresql://127.0.0.1:5432/lakehouse")
    assert all(key.startswith("spark.sql.") for key in conf)
    assert not any(key.startswith(("spark.driver.", "spark.ui.")) or key in SERVER_SIDE for key in conf)


def test_connect_conf_needs_no_local_jar(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-iceberg-runtime.jar")
    settings = connect_settings(tmp_path, jars=[missing])
    assert missing not in " ".join(spark_conf(settings).values())


def test_connect_conf_secrets_stay_masked(tmp_path: Path) -> None:
    settings = connect_settings(tmp_path)
    assert spark_conf(settings)["spark.sql.catalog.pg.jdbc.password"] == "pg-s3cr3t"
    described = describe_spark_conf(settings)
    assert described["spark.sql.catalog.pg.jdbc.password"] == "**********"
    assert "pg-s3cr3t" not in repr(described)


def test_a_classic_session_still_gets_the_full_configuration(tmp_path: Path) -> None:
    settings = load_settings(spark={"master": "local[2]", "conf": {"spark.executor.cores": "2"}})
    conf = spark_conf(settings)
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.executor.cores"] == "2"
    assert conf["spark.sql.catalog.lake.type"] == "jdbc"


def test_server_settings_with_a_connect_master_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"\['spark.executor.memory'\] configure the Spark JVM"):
        connect_settings(tmp_path, conf={"spark.executor.memory": "8g", "spark.sql.adaptive.enabled": "true"})


def test_a_connect_url_may_not_pin_the_server_session(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="icepack opens server sessions of its own"):
        load_settings(spark={"master": "sc://h:15002/;session_id=6b1cbd20-0d0b-4f8c-9d44-8a4f2e1a0b1c"})


@pytest.mark.parametrize("timeout", [0, -1, 601])
def test_connect_timeout_is_bounded(timeout: float) -> None:
    with pytest.raises(ConfigurationError, match="spark.connect_timeout_seconds"):
        load_settings(spark={"master": "sc://h:15002", "connect_timeout_seconds": timeout})


@pytest.mark.parametrize("url", ["spark-connect:4040", "http://h:4040/api/v1", "ftp://h:4040"])
def test_a_connect_ui_url_must_be_a_ui_address(url: str) -> None:
    with pytest.raises(ConfigurationError, match="spark.connect_ui_url"):
        load_settings(spark={"master": "sc://h:15002", "connect_ui_url": url})


def test_a_connect_ui_url_needs_a_connect_master() -> None:
    assert load_settings(spark={"master": "sc://h:15002", "connect_ui_url": "http://h:4040"})
    with pytest.raises(ConfigurationError, match="connect_ui_url is the Spark UI of an sc:// master"):
        load_settings(spark={"master": "local[2]", "connect_ui_url": "http://h:4040"})


def test_a_batch_on_a_connect_server_runs_interpreted_unless_told_otherwise(tmp_path: Path) -> None:
    assert connect_batch_conf(connect_settings(tmp_path)) == INTERPRETED_CONF == {
        "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    assert connect_batch_conf(connect_settings(tmp_path, connect_batch_codegen=True)) == {}
    own = connect_settings(tmp_path, conf={"spark.sql.codegen.wholeStage": "true"})
    assert connect_batch_conf(own) == {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}  # the configured key
    assert connect_batch_conf(load_settings(spark={"master": "local[2]"})) == {}  # a classic session's cache
