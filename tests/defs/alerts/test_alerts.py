"""The alert sensor against a real Dagster instance, real maintenance history in the state database and
a real HTTP server on 127.0.0.1 receiving its POSTs: a quarantine posts exactly one alert (a second
tick and a restart from the cursor post nothing), a release followed by a new quarantine posts again,
two failures in a row post a warning, a failed health-sync run posts once, a webhook that is down or
answers 500 neither crashes the sensor nor loses the alert (it is posted at the next tick), and the
webhook URL (it carries a token) appears in no result, cursor, skip reason or log line."""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest
from pydantic import SecretStr

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.alerts.alert_sensor import NOT_CONFIGURED
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import discover, evaluate_sensor, record_failures, small_file_table
from tests.factories import settings_with_platform
from tests.network import free_port
from tests.webhook_server import TOKEN, Webhook, running_webhook

SENSOR = "alert_sensor"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    with running_webhook() as hook:
        yield hook


def _defs(settings: IcepackSettings, platform: PlatformSettings, url: str | None) -> dg.Definitions:
    secret = SecretStr(url) if url is not None else None
    return build_definitions(
        settings_with_platform(settings, platform.model_copy(update={"alert_webhook_url": secret}))
    )


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/services/{TOKEN}"


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    result = evaluate_sensor(defs, SENSOR, instance, cursor)
    assert isinstance(result, dg.SensorResult)
    assert not result.run_requests
    assert TOKEN not in (result.cursor or "") and TOKEN not in str(result.skip_reason)
    return result


@pytest.fixture
def table(
    scoped_settings: IcepackSettings, platform: PlatformSettings, catalogs: CatalogSet, namespace: str,
    instance: dg.DagsterInstance,
) -> str:
    """One real table of the test's namespace, discovered into the instance's partitions."""
    small_file_table(catalogs.get("lake"), f"{namespace}.orders", appends=1)
    partitions = discover(_defs(scoped_settings, platform, None), instance)
    assert partitions == [f"lake.{namespace}.orders"]
    return partitions[0]


def test_a_quarantine_posts_exactly_one_alert(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance,
    webhook: Webhook, table: str, capfd: pytest.CaptureFixture[str],
) -> None:
    defs = _defs(scoped_settings, platform, webhook.url)
    first = _tick(defs, instance, None)
    assert webhook.received == [] and "nothing new" in str(first.skip_reason)

    record_failures(scoped_settings, table, times=3)
    second = _tick(defs, instance, first.cursor)
    assert len(webhook.received) == 1, webhook.received
    text = webhook.received[0]["text"]
    assert set(webhook.received[0]) == {"text"}
    assert "QUARANTINED" in text and table in text and "disk full" in text
    assert f"icepack quarantine release {table}" in text and "release_quarantine_job" in text
    assert "1 alert(s) posted" in str(second.skip_reason)

    third = _tick(defs, instance, second.cursor)
    restarted = _tick(_defs(scoped_settings, platform, webhook.url), instance, third.cursor)
    assert len(webhook.received) == 1 and "nothing new" in str(restarted.skip_reason)
    logs = capfd.readouterr().err
    assert TOKEN not in logs and "alert posted: quarantine" in logs


def test_a_release_then_a_new_quarantine_alerts_again(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance,
    webhook: Webhook, table: str,
) -> None:
    defs = _defs(scoped_settings, platform, webhook.url)
    record_failures(scoped_settings, table, times=3, days_ago=10)
    cursor = _tick(defs, instance, None).cursor
    Engine(scoped_settings).release_quarantine(parse_table_key(table))
    cursor = _tick(defs, instance, cursor).cursor
    assert len(webhook.received) == 1

    record_failures(scoped_settings, table, times=3, days_ago=0.5)
    cursor = _tick(defs, instance, cursor).cursor
    _tick(defs, instance, cursor)
    assert [("QUARANTINED" in m["text"]) for m in webhook.received] == [True, True]


def test_a_release_and_new_quarantine_between_two_ticks_still_alert(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance,
    webhook: Webhook, table: str,
) -> None:
    defs = _defs(scoped_settings, platform, webhook.url)
    record_failures(scoped_settings, table, times=3, days_ago=10)
    cursor = _tick(defs, instance, None).cursor
    Engine(scoped_settings).release_quarantine(parse_table_key(table))
    record_failures(scoped_settings, table, times=3, days_ago=0.5)
    _tick(defs, instance, cursor)
    assert len(webhook.received) == 2


def test_two_failures_in_a_row_post_a_warning_then_the_quarantine_posts_its_own(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance,
    webhook: Webhook, table: str,
) -> None:
    defs = _defs(scoped_settings, platform, webhook.url)
    record_failures(scoped_settings, table, times=1, days_ago=10)
    cursor = _tick(defs, instance, None).cursor
    assert webhook.received == []

    record_failures(scoped_settings, table, times=1, days_ago=9)
    cursor = _tick(defs, instance, cursor).cursor
    cursor = _tick(defs, instance, cursor).cursor
    assert len(webhook.received) == 1
    warning = webhook.received[0]["text"]
    assert "failed 2 times in a row" in warning and table in warning and "at 3 it is quarantined" in warning

    record_failures(scoped_settings, table, times=1, days_ago=8)
    _tick(defs, instance, cursor)
    assert len(webhook.received) == 2 and "QUARANTINED" in webhook.received[1]["text"]


def test_a_failed_health_sync_run_posts_once(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance,
    webhook: Webhook, namespace: str,
) -> None:
    defs = _defs(scoped_settings, platform, webhook.url)
    run = defs.resolve_job_def("health_sync").execute_in_process(
        instance=instance,
        run_config={"ops": {"sync_tables": {"config": {"tables": [f"lake.{namespace}.never_discovered"]}}}},
        raise_on_error=False,
    )
    assert not run.success
    cursor = _tick(defs, instance, None).cursor
    cursor = _tick(defs, instance, cursor).cursor
    assert len(webhook.received) == 1, webhook.received
    text = webhook.received[0]["text"]
    assert run.run_id in text and "health-sync run" in text and "none of the tables" in text


def test_a_failed_health_sync_that_dagster_retries_alerts_only_on_its_last_attempt(
    scoped_settings: IcepackSettings, platform: PlatformSettings, webhook: Webhook, namespace: str
) -> None:
    defs = _defs(scoped_settings, platform, webhook.url)
    config = {"ops": {"sync_tables": {"config": {"tables": [f"lake.{namespace}.never_discovered"]}}}}
    with dg.instance_for_test(overrides={"run_retries": {"enabled": True}}) as instance:
        job = defs.resolve_job_def("health_sync")
        first = job.execute_in_process(instance=instance, run_config=config, raise_on_error=False)
        assert instance.get_run_by_id(first.run_id).tags["dagster/will_retry"] == "true"
        cursor = _tick(defs, instance, None).cursor
        assert webhook.received == []
        last = job.execute_in_process(  # a run with no retries left, as the last retry is
            instance=instance, run_config=config, raise_on_error=False, tags={"dagster/max_retries": "0"}
        )
        assert instance.get_run_by_id(last.run_id).tags["dagster/will_retry"] == "false"
        _tick(defs, instance, cursor)
    assert len(webhook.received) == 1 and last.run_id in webhook.received[0]["text"]


def test_a_webhook_that_is_down_does_not_crash_the_sensor_and_is_retried(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance,
    webhook: Webhook, table: str, capfd: pytest.CaptureFixture[str],
) -> None:
    record_failures(scoped_settings, table, times=3)
    down = _tick(_defs(scoped_settings, platform, _closed_port_url()), instance, None)
    logs = capfd.readouterr().err
    assert "not delivered" in logs and "retried next tick" in str(down.skip_reason)

    webhook.status = 500
    refused = _tick(_defs(scoped_settings, platform, webhook.url), instance, down.cursor)
    assert "HTTP 500" in str(refused.skip_reason) and webhook.received == []

    webhook.status = 200
    defs = _defs(scoped_settings, platform, webhook.url)
    delivered = _tick(defs, instance, refused.cursor)
    _tick(defs, instance, delivered.cursor)
    assert len(webhook.received) == 1 and "QUARANTINED" in webhook.received[0]["text"]
    logs += capfd.readouterr().err
    assert TOKEN not in logs and "alert posted: quarantine" in logs


def test_without_a_webhook_alerting_is_off(
    scoped_settings: IcepackSettings, platform: PlatformSettings, instance: dg.DagsterInstance, table: str
) -> None:
    """Unset, the sensor says so at every tick (in the UI) and remembers nothing: once a URL is set, its
    first tick alerts on what is quarantined or failing then."""
    defs = _defs(scoped_settings, platform, None)
    record_failures(scoped_settings, table, times=3)
    result = _tick(defs, instance, None)
    assert result.skip_reason is not None and result.skip_reason.skip_message == NOT_CONFIGURED
    assert result.cursor is None
