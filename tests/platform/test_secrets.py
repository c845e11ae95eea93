"""Scenario 17, platform part: secrets never leave the settings object.

The platform is configured with a PostgreSQL-backed catalog with a password, an Apache Polaris-style
REST catalog with an OAuth2 client secret (unreachable, so its errors are exercised) and a maintenance
history database URL with a password. Discovery, health sync (one table measured, one failing on the
unreachable catalog) and a maintenance run that really fails on Spark all run on a real instance with
PostgreSQL storage. Then every run record (tags, config), every event of every run (messages,
metadata, errors), every sensor result, the compute logs Dagster captured, a dump of Dagster's whole
database, and the Python log records are searched for each secret: none may appear.

The alert path: a real `dagster-daemon` (production YAML, PostgreSQL storage) ticks the alert sensor,
its webhook URL (carrying a token) and the state database URL (carrying a password) given to the code
location only as environment variables, as the Kubernetes Secret gives them; a table failing its
maintenance makes it post a warning to a local webhook. Then the sensor's ticks and cursor, the tick
logs the daemon captured, the daemon's own output, every file of its DAGSTER_HOME and a dump of
Dagster's database are searched for the token and the password.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from urllib.parse import quote

import dagster as dg
import pytest
from pydantic import SecretStr

from icepack_dagster.config.catalogs import PostgresCatalogSettings, RestCatalogSettings
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.conftest import PG_HOST, PG_PORT, PG_USER
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    execute_run_request,
    latest_health,
    record_failures,
    run_health_sync,
    small_file_table,
)
from tests.factories import settings_with_platform
from tests.platform.platform_testkit import (
    ONLY_COMPACTION,
    code_location_settings,
    pg_env,
    write_code_location,
    write_dagster_home,
)
from tests.polling import wait_until
from tests.processes import DagsterDaemon
from tests.tables_testkit import table_fingerprint
from tests.webhook_server import TOKEN, running_webhook

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

CATALOG_PASSWORD = "pg-Catalog-Pa55word-7f3a"
CLIENT_SECRET = "polaris-Client-S3cret-91bd"
STATE_PASSWORD = "state-Db-Pa55word-c04e"
SECRETS = (CATALOG_PASSWORD, CLIENT_SECRET, STATE_PASSWORD)


def _secret_settings(settings: IcepackSettings, namespace: str, database: str) -> IcepackSettings:
    pg = settings.catalogs["pg"]
    assert isinstance(pg, PostgresCatalogSettings)
    return settings.model_copy(
        update={
            "catalogs": {
                "pg": pg.model_copy(update={"password": SecretStr(CATALOG_PASSWORD)}),
                "polaris": RestCatalogSettings(
                    uri="http://127.0.0.1:9/api/catalog",
                    warehouse="lakehouse",
                    client_id="icepack-client",
                    client_secret=SecretStr(CLIENT_SECRET),
                    oauth2_server_uri="http://127.0.0.1:9/api/catalog/v1/oauth/tokens",
                ),
            },
            "include": [f"pg.{namespace}.*", "polaris.*"],
            "state_url": SecretStr(
                f"postgresql+psycopg2://{PG_USER}:{STATE_PASSWORD}@{PG_HOST}:{PG_PORT}/{database}"
            ),
        }
    )


def _leaks(text: str, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    return [secret for secret in secrets if secret in text]


def _pg_dump(database: str) -> str:
    dump = subprocess.run(
        ["pg_dump", "-h", PG_HOST, "-p", str(PG_PORT), "-U", PG_USER, "--no-owner", database],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dump.stdout


def _files(root: Path) -> dict[str, str]:
    return {str(p): p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()}


def test_no_secret_in_runs_events_logs_or_storage(
    spark,  # type: ignore[no-untyped-def]
    settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    pg_instance: dg.DagsterInstance,
    dagster_database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for logger in ("icepack_dagster", "dagster", "pyiceberg"):
        caplog.set_level(logging.DEBUG, logger=logger)
    secret = _secret_settings(settings, namespace, dagster_database)
    pg = catalogs.get("pg")
    pg.create_namespace_if_not_exists(namespace)
    properties = {**ONLY_COMPACTION, "icepack.spark.sql.shuffle.partitions": "lots"}
    small_file_table(pg, f"{namespace}.leaky", appends=10, properties=properties)
    table = f"pg.{namespace}.leaky"
    before = table_fingerprint(spark, table)
    instance = pg_instance
    defs = build_definitions(settings_with_platform(secret, PlatformSettings()))
    reachable = build_definitions(  # the same secrets, without the unreachable catalog
        settings_with_platform(
            secret.model_copy(update={"catalogs": {"pg": secret.catalogs["pg"]}}), PlatformSettings()
        )
    )
    said: list[object] = []

    incomplete = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    assert isinstance(incomplete, dg.SkipReason) and "polaris" in incomplete.skip_message
    discovered = evaluate_sensor(reachable, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    instance.add_dynamic_partitions(PARTITIONS_NAME, ["polaris.sales.orders"])
    assert execute_run_request(defs, instance, discovered.run_requests[0], "health_sync").success
    assert run_health_sync(defs, instance, ["polaris.sales.orders"]).success
    assert latest_health(instance, "polaris.sales.orders").state == "unknown"
    decided = evaluate_sensor(defs, "maintenance_sensor", instance)
    (request,) = decided.run_requests
    failed = execute_run_request(defs, instance, request, "maintenance")
    assert not failed.success
    (report,) = [e for e in failed.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert report.step_failure_data.user_failure_data.metadata[OUTCOME].value == "failed"
    assert table_fingerprint(spark, table) == before
    said += [incomplete, discovered, decided]

    corpus: dict[str, str] = {f"sensor result {i}": repr(r) for i, r in enumerate(said)}
    for record in instance.get_run_records():
        run = record.dagster_run
        corpus[f"run {run.run_id}"] = dg.serialize_value(run)
        corpus[f"events of {run.run_id}"] = "\n".join(
            dg.serialize_value(entry) for entry in instance.all_logs(run.run_id)
        )
    corpus |= _files(Path(instance.root_directory))
    corpus["pg_dump of Dagster's database"] = _pg_dump(dagster_database)
    corpus["python log records"] = "\n".join(r.getMessage() for r in caplog.records)

    everything = "\n".join(corpus.values())
    assert len(corpus) > 10 and "Spark SQL override" in everything and "polaris" in everything
    assert "compute_logs" in " ".join(corpus), "no compute log was captured: nothing to search"
    leaked = {where: _leaks(text) for where, text in corpus.items() if _leaks(text)}
    assert not leaked, f"secrets leaked into: {leaked}"


ALERT_ONLY = """
import dagster as dg

from icepack_dagster.definitions import deployment_assets, deployment_jobs
from icepack_dagster.config.platform import PlatformSettings as DefaultPlatform

ASSETS, JOBS = deployment_assets(DefaultPlatform()), deployment_jobs(DefaultPlatform())
from icepack_dagster.defs.alerts.alert_sensor import build_alert_sensor
from icepack_dagster.defs.resources import build_resources

defs = dg.Definitions(
    assets=list(ASSETS),
    jobs=list(JOBS),
    sensors=[build_alert_sensor(SETTINGS.platform)],
    resources=build_resources(SETTINGS),
)
"""


@pytest.mark.daemon
def test_no_secret_in_the_alert_sensors_ticks_logs_or_storage(
    settings: IcepackSettings,
    namespace: str,
    dagster_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state_url = f"postgresql+psycopg2://{PG_USER}:{quote(STATE_PASSWORD)}@{PG_HOST}:{PG_PORT}/{dagster_database}"
    secrets = (TOKEN, STATE_PASSWORD)
    table = f"lake.{namespace}.failing"
    record_failures(settings.model_copy(update={"state_url": SecretStr(state_url)}), table, times=1)
    home = write_dagster_home(tmp_path)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(PARTITIONS_NAME, [table])
    workspace = write_code_location(tmp_path, "alert_only", ALERT_ONLY, code_location_settings(settings))

    with running_webhook() as webhook:
        daemon_env = {
            **env,
            "ICEPACK_STATE_URL": state_url,
            "ICEPACK_PLATFORM_ALERT_WEBHOOK_URL": webhook.url,
            "ICEPACK_PLATFORM_ALERT_FAILING_AFTER": "1",
        }
        daemon = DagsterDaemon(home, workspace, daemon_env, tmp_path / "daemon.log")
        try:
            daemon.start()
            wait_until(lambda: webhook.received, "the alert sensor to post the failing table's alert")
            wait_until(
                lambda: any("alert posted" in text for text in _files(home).values()),
                "the daemon to store the alert tick's log",
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
        finally:
            daemon.stop()

    (alert,) = webhook.received
    assert table in alert["text"] and "disk full" in alert["text"]
    corpus: dict[str, str] = {"alert posted": repr(alert), "daemon output": daemon.log.read_text()}
    for sensor in instance.all_instigator_state():
        corpus[f"sensor state {sensor.instigator_name}"] = dg.serialize_value(sensor)
        for tick in instance.get_ticks(sensor.instigator_origin_id, sensor.selector_id):
            corpus[f"tick {tick.tick_id}"] = dg.serialize_value(tick)
    corpus |= _files(home)
    corpus["pg_dump of Dagster's database"] = _pg_dump(dagster_database)

    assert any(name.startswith("tick ") for name in corpus), "no alert sensor tick to search"
    assert "alert posted: failing" in "\n".join(corpus.values())
    leaked = {where: _leaks(text, secrets) for where, text in corpus.items() if _leaks(text, secrets)}
    assert not leaked, f"secrets leaked into: {leaked}"
