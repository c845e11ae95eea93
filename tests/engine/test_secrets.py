"""Contract: catalog credentials never appear in what the engine or the CLI says: not in exceptions,
reports, logs (every Python logger at DEBUG, captured) or the output of the `icepack` command, also
when the real PostgreSQL server rejects the credentials and when Spark's JDBC catalog fails with them.
The errors still say which catalog failed and what to check.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.catalogs import spark_catalog_conf
from icepack_dagster.config.settings import load_settings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.store.history_store import HistoryStore
from tests.conftest import PG_HOST, PG_PORT
from tests.factories import make_action

pytestmark = pytest.mark.spark

ICEPACK = str(Path(sys.executable).parent / "icepack")
SECRET = f"Sekr3t{uuid.uuid4().hex[:12]}Pw"
ROLE = f"icepack_no_role_{uuid.uuid4().hex[:8]}"  # the server trusts local logins, so an unknown role
# is how this test server rejects credentials; the password travels in every connection attempt


def rejected_catalog(home: Path, database: str) -> dict[str, object]:
    return {
        "kind": "postgres",
        "host": PG_HOST,
        "port": PG_PORT,
        "database": database,
        "user": ROLE,
        "password": SECRET,
        "warehouse": str(home / "guarded_warehouse"),
    }


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text
        assert SECRET[2:-2] not in text  # nor a recognisable part of it


def test_rejected_credentials_never_reach_errors_reports_or_logs(
    postgres_database: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    settings = load_settings(
        home=tmp_path, catalogs={"guarded": rejected_catalog(tmp_path, postgres_database)}
    )
    engine = Engine(settings, history=HistoryStore(f"sqlite:///{tmp_path / 'state.db'}"))
    key = TableKey(catalog="guarded", namespace=("sales",), name="orders")
    caplog.set_level(logging.DEBUG)

    discovery = engine.discover()
    with pytest.raises(IcepackError) as status_error:
        engine.status(key)
    report = engine.maintain(key)

    assert [f.catalog for f in discovery.failures] == ["guarded"]
    assert "guarded" in str(status_error.value) and ROLE in str(status_error.value)
    assert report.outcome == "failed" and "guarded" in (report.first_error or "")
    out, err = capfd.readouterr()
    assert_no_secret(
        discovery.model_dump_json(),
        str(status_error.value),
        report.model_dump_json(),
        caplog.text,
        out,
        err,
        settings.model_dump_json(),
        repr(settings),
    )


def test_spark_catalog_failures_never_show_the_password(
    spark: SparkSession, postgres_database: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(
        home=tmp_path, catalogs={"guarded": rejected_catalog(tmp_path, postgres_database)}
    )
    conf = spark_catalog_conf("guarded", settings.catalogs["guarded"], settings)
    assert SECRET in conf.values()  # Spark gets the password, as it must

    configured = spark.newSession()  # configured before logs are captured: py4j logs its commands
    for name, value in conf.items():  # at DEBUG, and this setup is the test's, not the engine's
        configured.conf.set(name, value)

    class WithGuardedCatalog:
        def newSession(self) -> SparkSession:  # noqa: N802 - SparkSession's own name
            return configured

    key = TableKey(catalog="guarded", namespace=("sales",), name="orders")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(IcepackError) as caught:
        MaintenanceRunner(WithGuardedCatalog(), "guarded").run(  # type: ignore[arg-type]
            key, [make_action(MaintenanceAction.REWRITE_MANIFESTS)]
        )

    assert key.text in str(caught.value) and ROLE in str(caught.value), str(caught.value)
    assert_no_secret(str(caught.value), caplog.text)


def test_the_icepack_command_never_prints_the_password(postgres_database: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {
        "ICEPACK_HOME": str(tmp_path),
        "ICEPACK_CATALOGS": json.dumps({"guarded": rejected_catalog(tmp_path, postgres_database)}),
    }
    # the state database's URL carries a password too; `config` must mask it
    state_url = f"postgresql+psycopg2://{ROLE}:{SECRET}@{PG_HOST}:{PG_PORT}/{postgres_database}"
    failing = (("tables",), ("status", "sales.orders"), ("maintain", "sales.orders", "--json"))
    runs = {
        args: subprocess.run([ICEPACK, *args], env=env, capture_output=True, text=True, timeout=300)
        for args in failing
    }
    runs[("config",)] = subprocess.run(
        [ICEPACK, "config"], env=env | {"ICEPACK_STATE_URL": state_url}, capture_output=True, text=True,
        timeout=60,
    )

    for args, done in runs.items():
        assert_no_secret(done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, args
    shown = json.loads(runs[("config",)].stdout)
    assert runs[("config",)].returncode == 0 and shown["state_url"] == "**********"
    for args in failing:
        assert runs[args].returncode == 1, (args, runs[args].stderr)
        assert "guarded" in runs[args].stdout + runs[args].stderr
    assert json.loads(runs[("maintain", "sales.orders", "--json")].stdout)["outcome"] == "failed"
