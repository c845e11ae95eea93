"""Contract: a table behind a real Iceberg REST catalog (Iceberg's own REST catalog server, SQLite-backed)
is discovered, measured, health-synced and fully maintained, with contents unchanged on main and on
every branch and tag. Both engines authenticate with OAuth2 client credentials against the server's
token endpoint (`/v1/oauth/tokens`), proven on the wire by a recording proxy: PyIceberg and Iceberg's
Java REST client in Spark each ask for a token, and every catalog request carries the token the server
issued. Neither the client secret nor the token appears in any output: Python logs, the JVM's output,
reports, settings' reprs, CLI output and errors. The statistics actions, off by default, turned on by a
table's `icepack.stats.*` properties, compute both statistics files through the REST catalog and the
table's metadata (read by PyIceberg) registers them for main's snapshot, contents unchanged.
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
import yaml

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import CatalogUnavailableError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.config.catalogs.catalog_testkit import EAGER_MOR, EVERY_ACTION, STATISTICS, secrets_in
from tests.config.catalogs.conftest import SessionsWithCatalogs
from tests.config.catalogs.servers import RecordingProxy
from tests.engine.safety_testkit import age_files, files_under
from tests.tables_testkit import (
    arrow_fingerprint,
    contents_by_version,
    kept_versions,
    local,
    make_table,
    table_fingerprint,
    table_key,
)

pytestmark = [pytest.mark.spark, pytest.mark.jvm_servers]

CLIENT_ID = "icepack-maintainer"
CLIENT_SECRET = "rest-Client-S3cret-5e1f"
TOKEN = f"client-credentials-token:sub={CLIENT_ID}"  # what Iceberg's server issues for these credentials
SCOPE = "PRINCIPAL_ROLE:ALL"
ICEPACK = str(Path(sys.executable).parent / "icepack")


def rest_catalog(proxy: RecordingProxy, **overrides: str) -> dict[str, str]:
    return {
        "kind": "rest",
        "uri": proxy.url,
        "warehouse": "lake",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "oauth2_server_uri": f"{proxy.url}/v1/oauth/tokens",
    } | overrides


def rest_settings(settings: IcepackSettings, home: Path, proxy: RecordingProxy) -> IcepackSettings:
    return load_settings(home=home, catalogs={"rest": rest_catalog(proxy)}, spark=settings.spark.model_dump())


def token_requests(proxy: RecordingProxy) -> list:  # type: ignore[type-arg]
    return [e for e in proxy.exchanges if e.path.startswith("/v1/oauth/tokens")]


def test_a_rest_table_is_discovered_measured_and_fully_maintained_with_oauth2(
    spark, settings: IcepackSettings, rest_proxy: RecordingProxy, tmp_path: Path, caplog, capfd
) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.DEBUG)
    rest = rest_settings(settings, tmp_path / "home", rest_proxy)
    catalogs = CatalogSet(rest)
    key = table_key(f"ns_{uuid.uuid4().hex[:8]}", "events", "rest")
    make_table(catalogs, key, commits=10, properties=EAGER_MOR)
    table = catalogs.get("rest").load_table(key.identifier)
    sessions = SessionsWithCatalogs(spark, rest)
    session = sessions.newSession()
    q = qualified_table("rest", key)
    for doomed in (1, 25):  # position delete files, so every action has work
        session.sql(f"DELETE FROM {q} WHERE id = {doomed}")
    session.sql(f"ALTER TABLE {q} CREATE TAG before_maintenance")
    session.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    session.sql(f"INSERT INTO {q}.branch_audit VALUES (500, 0, 'branch only')")
    root = local(catalogs.get("rest").load_table(key.identifier).location())
    data_file = sorted(files_under(root / "data"))[0]
    orphan = data_file.with_name("orphan.parquet")
    orphan.write_bytes(data_file.read_bytes())
    age_files(root)
    before, versions = table_fingerprint(session, q), contents_by_version(session, q)
    read_before = arrow_fingerprint(catalogs.get("rest").load_table(key.identifier))
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    engine = Engine(rest, catalogs, spark_provider=lambda: sessions, history=history)

    discovered = engine.discover()
    synced = engine.refresh_statuses([key], {})
    recommendation = engine.recommend(key)
    report = engine.maintain(key, recommendation=recommendation)

    assert key in discovered.tables
    assert set(synced.statuses) == {key.text} and not synced.failures
    synced_status = synced.statuses[key.text]
    assert synced_status.live_data_files == 10 and synced_status.live_delete_files == 2
    assert [a.action for a in recommendation.actions] == EVERY_ACTION
    ran = [r.status for r in report.results if r.action in EVERY_ACTION]  # statistics: skipped, off
    assert ran == ["succeeded"] * 5, report.first_error
    after = engine.status(key)
    assert after.live_data_files < 10 and after.live_delete_files == 0, after
    assert not orphan.exists() and table.metadata_location != after.metadata_location
    check = sessions.newSession()
    assert table_fingerprint(check, q) == before
    assert kept_versions(versions, contents_by_version(check, q))
    assert arrow_fingerprint(catalogs.get("rest").load_table(key.identifier)) == read_before

    # OAuth2 client credentials, for real, from both engines
    tokens = token_requests(rest_proxy)
    assert {e.form.get("grant_type") for e in tokens} == {"client_credentials"}
    assert {(e.form.get("client_id"), e.form.get("scope")) for e in tokens} == {(CLIENT_ID, SCOPE)}
    python_clients = [e for e in tokens if "PyIceberg" in e.user_agent]
    java_clients = [e for e in tokens if "PyIceberg" not in e.user_agent]
    assert python_clients and java_clients, [e.user_agent for e in tokens]
    catalog_calls = [e for e in rest_proxy.exchanges if e not in tokens]
    assert {e.authorization for e in catalog_calls} == {f"Bearer {TOKEN}"}
    assert {"PyIceberg" in e.user_agent for e in catalog_calls} == {True, False}

    # and neither the secret nor the token in any output
    out, err = capfd.readouterr()
    outputs = {
        "stdout": out,
        "stderr": err,
        **{f"log {r.name}": "" for r in caplog.records},
        "report": report.model_dump_json(),
        "settings": f"{rest!r} {rest} {rest.model_dump_json()}",
    }
    for record in caplog.records:
        outputs[f"log {record.name}"] += record.getMessage() + "\n"
    leaked = {name: secrets_in(text, (CLIENT_SECRET, TOKEN)) for name, text in outputs.items()}
    assert not any(leaked.values()), leaked


def test_statistics_turned_on_by_table_properties_are_registered_through_rest(
    spark, settings: IcepackSettings, rest_proxy: RecordingProxy, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    rest = rest_settings(settings, tmp_path / "home", rest_proxy)
    catalogs = CatalogSet(rest)
    key = table_key(f"stats_{uuid.uuid4().hex[:8]}", "events", "rest")
    stats_on = {
        "format-version": "2",
        "icepack.cadence-hours": "0",
        "icepack.stats.table.commits-behind": "1",
        "icepack.stats.partition.commits-behind": "1",
    }
    make_table(catalogs, key, commits=2, partitions=2, properties=stats_on)
    sessions = SessionsWithCatalogs(spark, rest)
    q = qualified_table("rest", key)
    session = sessions.newSession()
    session.sql(f"ALTER TABLE {q} CREATE TAG before_statistics")
    before, versions = table_fingerprint(session, q), contents_by_version(session, q)
    metadata = catalogs.get("rest").load_table(key.identifier).metadata
    snapshot = metadata.current_snapshot_id
    assert not metadata.statistics and not metadata.partition_statistics
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    engine = Engine(rest, catalogs, spark_provider=lambda: sessions, history=history)

    recommendation = engine.recommend(key)
    report = engine.maintain(key, recommendation=recommendation, only=STATISTICS)

    assert [a.action for a in recommendation.actions if a.action in STATISTICS] == list(STATISTICS)
    by_action = {r.action: r for r in report.results}
    assert [by_action[a].status for a in STATISTICS] == ["succeeded", "succeeded"], report.first_error
    written = {a: by_action[a].impact.procedure_output for a in STATISTICS}
    metadata = catalogs.get("rest").load_table(key.identifier).metadata
    assert metadata.current_snapshot_id == snapshot  # no snapshot added
    assert {s.snapshot_id: s.statistics_path for s in metadata.statistics} == {
        snapshot: written[MaintenanceAction.COMPUTE_TABLE_STATS]["statistics_file"]
    }
    assert {s.snapshot_id: s.statistics_path for s in metadata.partition_statistics} == {
        snapshot: written[MaintenanceAction.COMPUTE_PARTITION_STATS]["partition_statistics_file"]
    }
    check = sessions.newSession()
    assert table_fingerprint(check, q) == before
    assert contents_by_version(check, q) == versions


def test_icepack_reads_and_maintains_a_rest_table_without_showing_its_secret(
    spark, settings: IcepackSettings, rest_proxy: RecordingProxy, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The user's path: `icepack` in its own process, configured by a YAML file, its own Spark session
    (Iceberg's REST client in a fresh JVM) and its own OAuth2 exchanges."""
    rest = rest_settings(settings, tmp_path / "home", rest_proxy)
    key = table_key(f"cli_{uuid.uuid4().hex[:8]}", "orders", "rest")
    make_table(CatalogSet(rest), key, commits=8, properties=EAGER_MOR)
    before = arrow_fingerprint(CatalogSet(rest).get("rest").load_table(key.identifier))
    config = tmp_path / "icepack.yaml"
    config.write_text(yaml.safe_dump({"catalogs": {"rest": rest_catalog(rest_proxy)}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {
        "ICEPACK_CONFIG": str(config),
        "ICEPACK_HOME": str(tmp_path / "home"),
        "ICEPACK_SPARK__MASTER": "local[2]",
        "ICEPACK_SPARK__DRIVER_MEMORY": "1g",
        "ICEPACK_SPARK__JAR_CACHE": str(settings.spark.jar_cache),
    }
    outputs = []
    for args in (
        ["tables", "--json"],
        ["status", key.dotted, "--json"],
        ["config"],
        ["maintain", key.dotted, "--json"],
    ):
        done = subprocess.run([ICEPACK, *args], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs += [done.stdout, done.stderr]

    assert key.dotted in json.loads(outputs[0])
    assert json.loads(outputs[2])["live_data_files"] == 8
    maintained = json.loads(outputs[6])
    assert maintained["outcome"] == "succeeded", maintained
    assert "rewrite_data_files" in {r["action"] for r in maintained["results"]}
    table = CatalogSet(rest).get("rest").load_table(key.identifier)
    assert len(table.inspect.files()) < 8 and arrow_fingerprint(table) == before
    assert not secrets_in("\n".join(outputs), (CLIENT_SECRET, TOKEN))
    java_tokens = [e for e in token_requests(rest_proxy) if "PyIceberg" not in e.user_agent]
    assert java_tokens, "the CLI's Spark session did not exchange its credentials"


def test_a_token_endpoint_that_refuses_stops_the_catalog_with_a_clear_error(
    settings: IcepackSettings, rest_proxy: RecordingProxy, tmp_path: Path
) -> None:
    broken = rest_catalog(rest_proxy, oauth2_server_uri=f"{rest_proxy.url}/v1/oauth/no-such-endpoint")
    rest = load_settings(home=tmp_path, catalogs={"rest": broken}, spark=settings.spark.model_dump())

    with pytest.raises(CatalogUnavailableError) as caught:
        CatalogSet(rest).get("rest")

    message = str(caught.value)
    assert "'rest'" in message and "ICEPACK_CATALOGS__REST__" in message
    assert not secrets_in(message, (CLIENT_SECRET,))
    assert [e.path for e in rest_proxy.exchanges] == ["/v1/oauth/no-such-endpoint"]
