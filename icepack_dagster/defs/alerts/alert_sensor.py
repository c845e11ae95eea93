"""`alert_sensor`: posts an alert to the operator's webhook when a table enters quarantine (once per
episode), when a table's maintenance failed `alert_failing_after` times in a row (once per streak) and
when a health-sync run fails (once per run, and not for an attempt Dagster retries).

Its cursor records only what was delivered: an alert the webhook did not take is posted again at the
next tick, and a restart repeats nothing. The webhook URL carries a token: it is read from the
settings at each tick and appears in no cursor, log line, skip reason or error.
"""

from __future__ import annotations

import logging

import dagster as dg
from pydantic import SecretStr

from icepack_dagster.alerting.webhook import post_json
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.alerts.alert_sources import (
    failed_health_syncs,
    run_batch,
    run_error,
    will_be_retried,
)
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.table_histories import table_histories
from icepack_dagster.domain.decisions.sensor_cursors import AlertCursor, decode_cursor
from icepack_dagster.domain.reports.alerts import Alert, StreakSeen, health_sync_failed_alert, judge_streak
from icepack_dagster.exceptions import WebhookDeliveryError

ALERTED_RUNS_KEPT = 200
NOT_CONFIGURED = "alerting is off: set ICEPACK_PLATFORM_ALERT_WEBHOOK_URL (platform.alert_webhook_url)"


class _Outbox:
    """Delivers alerts until the webhook fails once; after that the tick sends nothing more."""

    def __init__(self, url: SecretStr, log: logging.Logger) -> None:
        self._url, self._log = url, log
        self.sent: list[Alert] = []
        self.error: str | None = None

    def send(self, alert: Alert) -> bool:
        if self.error is not None:
            return False
        try:
            post_json(self._url, alert.payload())
        except WebhookDeliveryError as error:
            self.error = str(error)
            self._log.warning(f"alert on {alert.subject} not delivered, retried next tick: {error}")
            return False
        self._log.info(f"alert posted: {alert.kind} {alert.subject}")
        self.sent.append(alert)
        return True


def _table_alerts(
    outbox: _Outbox, icepack: IcepackResource, instance: dg.DagsterInstance, cursor: AlertCursor,
    failing_after: int,
) -> dict[str, StreakSeen]:
    streaks: dict[str, StreakSeen] = {}
    for table, history, quarantine_after in table_histories(icepack.engine, instance):
        seen = cursor.streaks.get(table)
        alert, now = judge_streak(table, history, seen, failing_after, quarantine_after)
        remembered = now if alert is None or outbox.send(alert) else seen
        if remembered is not None:
            streaks[table] = remembered
    return streaks


def _run_alerts(
    outbox: _Outbox, instance: dg.DagsterInstance, platform: PlatformSettings, cursor: AlertCursor
) -> AlertCursor:
    after, alerted = cursor.runs_updated_after, list(cursor.alerted_runs)
    for record in failed_health_syncs(instance, platform, after):
        run_id = record.dagster_run.run_id
        if run_id not in alerted and not will_be_retried(record):
            alert = health_sync_failed_alert(run_id, run_batch(record), run_error(instance, run_id))
            if not outbox.send(alert):
                break
            alerted.append(run_id)
        after = record.update_timestamp
    kept = alerted[-ALERTED_RUNS_KEPT:]
    return cursor.model_copy(update={"runs_updated_after": after, "alerted_runs": kept})


def _summary(outbox: _Outbox) -> str:
    sent = f"{len(outbox.sent)} alert(s) posted" if outbox.sent else "nothing new to alert on"
    return sent if outbox.error is None else f"{sent}; webhook failed, retried next tick: {outbox.error}"


def build_alert_sensor(platform: PlatformSettings) -> dg.SensorDefinition:
    failing_after = platform.alert_failing_after

    names = DeploymentNames.of(platform)

    @dg.sensor(
        name=names.name("alert_sensor"),
        required_resource_keys={names.icepack_resource},
        default_status=dg.DefaultSensorStatus(platform.default_status),
        minimum_interval_seconds=platform.alert_interval_seconds,
        description="Posts to the alert webhook (Slack-compatible JSON) when a table is quarantined, when "
        "a table's maintenance keeps failing, and when a health-sync run fails; once each.",
    )
    def alert_sensor(context: dg.SensorEvaluationContext, **_direct: object) -> dg.SensorResult:
        icepack = icepack_of(context, names)
        url = icepack.settings.platform.alert_webhook_url
        if url is None:
            return dg.SensorResult(skip_reason=dg.SkipReason(NOT_CONFIGURED))
        cursor = decode_cursor(AlertCursor, context.cursor)
        outbox = _Outbox(url, context.log)
        streaks = _table_alerts(outbox, icepack, context.instance, cursor, failing_after)
        cursor = cursor.model_copy(update={"streaks": streaks})
        cursor = _run_alerts(outbox, context.instance, platform, cursor)
        return dg.SensorResult(skip_reason=dg.SkipReason(_summary(outbox)), cursor=cursor.encode())

    return alert_sensor


