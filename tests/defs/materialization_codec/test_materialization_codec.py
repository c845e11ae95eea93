"""The metadata codec: every record a materialization carries (status, health, recommendation,
maintenance report, fleet summary) decodes back to the same model, also after a trip through a real
Dagster instance's event storage; a record from another codec version or missing decodes to None; the
numbers people plot are numeric metadata, with a readable size beside every byte count; a summary comes
first and the JSON record last; the SQL shows each session setting once and wraps long calls;
maintenance impact is computed from the report; the health check fails WARN for warning and ERROR for
critical or unknown. A status measured from snapshot summaries round-trips too, and its metadata gives
the bounds of what it carries, never a count it does not know."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from icepack_dagster.defs import materialization_codec as md
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.domain.actions.maintenance_action import ActionImpact, ActionResult, MaintenanceAction
from icepack_dagster.domain.health.judging import unknown_health
from icepack_dagster.domain.health.model import HealthState, Severity
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.outcomes.maintenance_impact import maintenance_impact
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.recommendation.model import SkippedAction
from icepack_dagster.domain.reports.fleet import FleetSummary, TableAttention
from icepack_dagster.domain.sql.procedures import SESSION_SETUP, render_call
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.domain.table.status import CarriedBounds, FileSizeBucket, TableStatus
from tests.factories import NOW, make_action, make_health, make_issue, make_recommendation, make_status

TABLE = "lake.sales.orders"


def status() -> TableStatus:
    """A critical table of 40 small files, 3 position delete files and 44 snapshots."""
    return make_status(
        table=TABLE, location="file:///w/sales/orders", snapshot_id=7, live_data_files=40,
        live_position_delete_files=3, live_data_bytes=40_000, live_delete_bytes=900, total_records=400,
        position_delete_records=12, small_file_count=40, small_file_bytes=40_000,
        file_size_histogram=(
            FileSizeBucket(label="<1 MiB", lower_bytes=0, upper_bytes=1024**2, file_count=40),
        ),
        manifest_count=41, data_manifest_count=40, delete_manifest_count=1, manifest_bytes=123_456,
        snapshot_count=44, oldest_snapshot_age_seconds=7200.0, newest_snapshot_age_seconds=60.0,
        metadata_log_entries=44, tag_count=1,
        properties={"icepack.cadence-hours": "6", "write.format.default": "parquet"},
    )


HEALTH = make_health(
    HealthState.CRITICAL,
    make_issue(
        "SMALL_FILES",
        Severity.CRITICAL,
        1.0,
        metric="small_file_ratio",
        threshold=0.7,
        message="40 of 40 data files are small",
    ),
    table=TABLE,
)
RECOMMENDATION = make_recommendation(
    make_action(
        MaintenanceAction.REWRITE_DATA_FILES,
        reason="40 small files",
        priority=3.5,
        **{"min-input-files": "5"},
    ),
    table=TABLE,
    skipped=(SkippedAction(action=MaintenanceAction.REMOVE_ORPHAN_FILES, reason="ran 1 day ago"),),
    priority=3.5,
    expected_files_removed=39,
    estimated_bytes_to_rewrite=40_000,
)
REPORT = MaintenanceReport(
    table=TABLE,
    started_at=NOW,
    finished_at=NOW + timedelta(seconds=12.5),
    results=(
        ActionResult(
            action=MaintenanceAction.REWRITE_DATA_FILES,
            status="succeeded",
            statements=("CALL lake.system.rewrite_data_files(table => 'sales.orders')",),
            impact=ActionImpact(
                data_files_before=40,
                data_files_after=1,
                data_bytes_before=40_000,
                data_bytes_after=39_000,
                delete_files_before=3,
                delete_files_after=0,
            ),
            duration_seconds=8.0,
        ),
        ActionResult(
            action=MaintenanceAction.EXPIRE_SNAPSHOTS,
            status="succeeded",
            statements=("CALL x",),
            impact=ActionImpact(snapshots_before=45, snapshots_after=5),
            duration_seconds=2.0,
        ),
        ActionResult(
            action=MaintenanceAction.REMOVE_ORPHAN_FILES,
            status="succeeded",
            statements=("CALL y",),
            impact=ActionImpact(orphan_files_removed=4),
            duration_seconds=1.0,
        ),
    ),
)
HISTORY = TableHistory(table=TABLE, consecutive_failures=1, last_error="boom")


def test_records_round_trip_in_memory() -> None:
    assert md.decode_status(md.status_metadata(status())) == status()
    assert md.decode_health(md.health_metadata(HEALTH)) == HEALTH
    assert md.decode_recommendation(md.recommendation_metadata(RECOMMENDATION, HISTORY)) == RECOMMENDATION
    assert md.decode_report(md.maintenance_metadata(REPORT, HISTORY)) == REPORT
    fleet = FleetSummary(
        generated_at_epoch=1.0,
        tables=1,
        by_state={HealthState.CRITICAL: 1},
        table_states={TABLE: HealthState.CRITICAL},
        quarantined={TABLE: "boom"},
        attention=(
            TableAttention(table=TABLE, state=HealthState.CRITICAL, issues=("SMALL_FILES",), data_bytes=9,
                           quarantined=True, last_error="boom"),
        ),
        attention_total=1,
    )
    assert md.decode_fleet(md.fleet_metadata(fleet, "/m/icepack.prom", DEFAULT_NAMES.table_health)) == fleet


def test_missing_or_foreign_records_decode_to_none() -> None:
    assert md.decode_health({}) is None
    foreign = md.health_metadata(HEALTH) | {md.VERSION: dg.MetadataValue.int(md.CODEC_VERSION + 1)}
    assert md.decode_health(foreign) is None
    broken = md.health_metadata(HEALTH) | {md.HEALTH_JSON: dg.MetadataValue.json({"table": TABLE})}
    assert md.decode_health(broken) is None
    failed = md.status_failure_metadata("table lake.sales.orders: manifest list unreadable")
    assert md.decode_status(failed) is None
    assert md.decode_status_error(failed) == "table lake.sales.orders: manifest list unreadable"


def test_numbers_are_numeric_and_issues_a_table() -> None:
    status_md = md.status_metadata(status())
    assert isinstance(status_md["data_files"], dg.IntMetadataValue) and status_md["data_files"].value == 40
    assert isinstance(status_md["small_file_ratio"], dg.FloatMetadataValue)
    assert isinstance(status_md["file_size_histogram"], dg.TableMetadataValue)
    health_md = md.health_metadata(HEALTH)
    assert health_md[md.STATE].value == "critical" and health_md[md.STATE_RANK].value == 2
    issues = health_md["issues"]
    assert isinstance(issues, dg.TableMetadataValue)
    assert issues.records[0].data["code"] == "SMALL_FILES"
    assert "40 of 40 data files are small" in health_md[md.SUMMARY].value
    rec_md = md.recommendation_metadata(
        RECOMMENDATION,
        TableHistory(table=TABLE, consecutive_failures=3, quarantined=True, last_error="disk full"),
    )
    assert rec_md["quarantined"].value is True and rec_md["last_error"].value == "disk full"
    assert (
        "quarantined" in rec_md[md.SUMMARY].value and "icepack quarantine release" in rec_md[md.SUMMARY].value
    )


def test_a_paused_rewrite_shows_which_circuit_breaker_tripped() -> None:
    reason = "circuit breaker (same files rewritten) tripped: rewrite_data_files rewrote this table 3 times"
    paused = make_recommendation(table=TABLE, skipped=(
        SkippedAction(action=MaintenanceAction.REWRITE_DATA_FILES, reason=reason),
        SkippedAction(action=MaintenanceAction.EXPIRE_SNAPSHOTS, reason="cadence not elapsed"),
    ))
    rec_md = md.recommendation_metadata(paused, HISTORY)
    breakers = rec_md["circuit_breakers"]
    assert isinstance(breakers, dg.TableMetadataValue)
    assert [r.data for r in breakers.records] == [
        {"action": "rewrite_data_files", "breaker": "same files rewritten", "reason": reason}
    ]
    summary = rec_md[md.SUMMARY].value
    assert "`rewrite_data_files` paused by the same files rewritten circuit breaker" in summary
    unpaused = md.recommendation_metadata(RECOMMENDATION, HISTORY)["circuit_breakers"]
    assert isinstance(unpaused, dg.TableMetadataValue) and unpaused.records == []


def test_maintenance_impact_from_the_report() -> None:
    impact = maintenance_impact(REPORT)
    assert impact.before_after["data_files"] == (40, 1)
    assert impact.before_after["snapshots"] == (45, 5)
    assert impact.snapshots_expired == 40
    assert impact.orphan_files_removed == 4
    assert impact.files_reclaimed == 39 + 3 + 4
    assert impact.bytes_reclaimed == 1_000
    assert impact.duration_seconds == 12.5
    report_md = md.maintenance_metadata(REPORT, HISTORY)
    assert report_md["data_files_before"].value == 40 and report_md["data_files_after"].value == 1
    assert report_md[md.OUTCOME].value == "succeeded"
    assert "CALL lake.system.rewrite_data_files(table => 'sales.orders');" in report_md[md.SQL].value
    assert "```" not in report_md[md.SUMMARY].value  # the SQL is its own entry, the summary stays short


def test_a_readable_size_beside_every_byte_count() -> None:
    status_md = md.status_metadata(status())
    assert status_md["data_bytes"].value == 40_000 and status_md["data_size"].value == "39.1 KiB"
    assert status_md["manifest_bytes"].value == 123_456 and status_md["manifest_size"].value == "120.6 KiB"
    assert "39.1 KiB" in status_md["overview"].value
    rec_md = md.recommendation_metadata(RECOMMENDATION, HISTORY)
    assert rec_md["estimated_bytes_to_rewrite"].value == 40_000
    assert rec_md["estimated_size_to_rewrite"].value == "39.1 KiB"
    report_md = md.maintenance_metadata(REPORT, HISTORY)
    assert report_md[md.BYTES_RECLAIMED].value == 1_000 and report_md["size_reclaimed"].value == "1000 B"
    assert "data size: 39.1 KiB → 38.1 KiB" in report_md[md.SUMMARY].value
    fleet = FleetSummary(generated_at_epoch=1, tables=0, bytes_reclaimed_total=3 << 30)
    fleet_md = md.fleet_metadata(fleet, "/m/icepack.prom", DEFAULT_NAMES.table_health)
    assert fleet_md["bytes_reclaimed_total"].value == 3 << 30
    assert fleet_md["size_reclaimed_total"].value == "3 GiB"


def test_summary_first_and_the_json_record_last() -> None:
    """What a person reads opens each materialization; the machine record closes it."""
    fleet = FleetSummary(generated_at_epoch=1.0, tables=0)
    encoded = {
        md.STATUS_JSON: md.status_metadata(status()),
        md.HEALTH_JSON: md.health_metadata(HEALTH),
        md.RECOMMENDATION_JSON: md.recommendation_metadata(RECOMMENDATION, HISTORY),
        md.REPORT_JSON: md.maintenance_metadata(REPORT, HISTORY),
        md.FLEET_JSON: md.fleet_metadata(fleet, "/m/icepack.prom", DEFAULT_NAMES.table_health),
    }
    for json_key, metadata in encoded.items():
        keys = list(metadata)
        assert isinstance(metadata[keys[0]], dg.MarkdownMetadataValue), (json_key, keys[0])
        assert keys[-2:] == [json_key, md.VERSION], json_key
        assert [k for k in keys if isinstance(metadata[k], dg.JsonMetadataValue)] == [json_key]


def test_sql_shows_each_session_setting_once_and_wraps_long_calls() -> None:
    key = parse_table_key(TABLE)
    where = "day NOT IN ('2025-01-01, late', 'x)')"
    rewrite = render_call("lake", key, MaintenanceAction.REWRITE_DATA_FILES,
                          {"where": where, "min-input-files": "5"})
    manifests = render_call("lake", key, MaintenanceAction.REWRITE_MANIFESTS, {})
    results = tuple(
        ActionResult(action=action, status="succeeded", statements=(*SESSION_SETUP, call),
                     duration_seconds=1.0)
        for action, call in ((MaintenanceAction.REWRITE_DATA_FILES, rewrite),
                             (MaintenanceAction.REWRITE_MANIFESTS, manifests))
    )
    report = REPORT.model_copy(update={"results": results})
    block = md.maintenance_metadata(report, HISTORY)[md.SQL].value
    assert block.startswith("```sql\n") and block.endswith("\n```")
    sql = block.removeprefix("```sql\n").removesuffix("```")
    assert sql.count(SESSION_SETUP[0]) == 1 and sql.startswith(SESSION_SETUP[0] + ";")
    assert "CALL lake.system.rewrite_data_files(\n  table => '`lake`.`sales`.`orders`',\n" in sql
    assert "  where => 'day NOT IN (\\'2025-01-01, late\\', \\'x)\\')',\n" in sql
    assert "  options => map('min-input-files', '5')\n);" in sql
    assert f"{manifests};" in sql  # short enough for one line
    assert md.decode_report(md.maintenance_metadata(report, HISTORY)) == report  # the record keeps them all


def test_health_check_fails_warn_for_warning_error_for_critical_or_unknown() -> None:
    warning = make_health(HealthState.WARNING, make_issue("SNAPSHOT_BACKLOG", Severity.WARNING, 60.0),
                          table=TABLE)
    assert md.health_check_severity(HealthState.WARNING) is dg.AssetCheckSeverity.WARN
    assert md.health_check_severity(HealthState.CRITICAL) is dg.AssetCheckSeverity.ERROR
    assert md.health_check_severity(HealthState.UNKNOWN) is dg.AssetCheckSeverity.ERROR
    assert md.health_check_description(HEALTH) == "critical: SMALL_FILES: 40 of 40 data files are small"
    assert md.health_check_description(warning).startswith("warning: SNAPSHOT_BACKLOG: ")
    unknown = unknown_health(TABLE, "manifest list unreadable")
    assert md.health_check_description(unknown) == "unknown: manifest list unreadable"


def test_records_round_trip_through_event_storage(instance: dg.DagsterInstance) -> None:
    """What the sensor reads is what the asset wrote, after Dagster serialized it to its storage."""
    partitions = dg.StaticPartitionsDefinition([TABLE])

    @dg.asset(partitions_def=partitions)
    def record() -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={**md.status_metadata(status()), **md.health_metadata(HEALTH)})

    assert dg.materialize([record], instance=instance, partition_key=TABLE).success
    (stored,) = instance.fetch_materializations(record.key, limit=5).records
    assert stored.partition_key == TABLE
    metadata = dict(stored.asset_materialization.metadata)
    assert md.decode_status(metadata) == status()
    assert md.decode_health(metadata) == HEALTH


def summary_status() -> TableStatus:
    """The status of `status()` after 5 appended files, measured from snapshot summaries."""
    bounds = CarriedBounds(data_files_added=5, small_files=(40, 45), small_bytes=(40_000, 60_000),
                           partitions=(1, 3))
    return status().model_copy(update={
        "depth": "summary", "manifests_read_at": 7, "carried": bounds, "snapshot_id": 9,
        "live_data_files": 45,
    })


def test_a_summary_status_round_trips_and_claims_no_count_it_carries(instance: dg.DagsterInstance) -> None:
    carried = summary_status()
    metadata = md.status_metadata(carried)
    assert md.decode_status(metadata) == carried
    for exact_only in ("small_files", "small_file_ratio", "partitions", "file_size_histogram"):
        assert exact_only not in metadata
    assert (metadata["small_files_at_least"].value, metadata["small_files_at_most"].value) == (40, 45)
    assert metadata["entries_read_at_snapshot"].value == "7"
    assert "40-45 small (40 as of snapshot 7, 5 data files appended since" in metadata["overview"].value

    partitions = dg.StaticPartitionsDefinition([TABLE])

    @dg.asset(partitions_def=partitions)
    def record() -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata=md.status_metadata(carried))

    assert dg.materialize([record], instance=instance, partition_key=TABLE).success
    (stored,) = instance.fetch_materializations(record.key, limit=5).records
    assert md.decode_status(dict(stored.asset_materialization.metadata)) == carried
