"""Re-measures a table right after its maintenance succeeds, so its health (and the fleet view, which
the fleet sensor refreshes after every health sync, and the maintenance sensor, which reads health)
reflects the work within seconds instead of at the next sync.

It follows every run that materialized `maintained_table`, whichever job it ran as: the sensor's
`maintenance` job, or `__ASSET_JOB` from Materialize, the launchpad, a backfill or the GraphQL API. The
tables are the partitions of the run's `maintained_table` materializations; a dry run, or a run that
found nothing to do, changed nothing and is not followed. A `maintenance_batch` run is not followed
either: before it succeeds it has measured the tables it changed again and recorded their status and
health itself (`batch_maintenance.py`), so a sync after it would write the same facts twice (400
materializations for a batch of 200); the fleet sensor follows the batch run directly.
"""

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.event_reads import metadata_of
from icepack_dagster.defs.health_sync.job import build_health_sync_job, health_sync_run_config
from icepack_dagster.defs.maintenance.batch_job import build_maintenance_batch_job
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.run_tags import batch_tags, deployment_tags

_UNCHANGED = {"dry_run", "nothing_to_do"}


def maintained_tables(
    instance: dg.DagsterInstance, names: DeploymentNames, run_id: str
) -> tuple[list[str], list[str]]:
    """(tables the run maintained, tables it left unchanged), from its `maintained_table` events."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    changed: list[str] = []
    unchanged: list[str] = []
    for record in records:
        event = record.event_log_entry.asset_materialization
        if event is None or event.asset_key != names.maintained_table or event.partition is None:
            continue
        outcome = metadata_of(record).get(OUTCOME)
        kept = outcome is not None and outcome.value in _UNCHANGED
        (unchanged if kept else changed).append(event.partition)
    return sorted(set(changed)), sorted(set(unchanged))


def build_post_maintenance_sensor(platform: PlatformSettings) -> dg.RunStatusSensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)
    names = DeploymentNames.of(platform)
    batch_job = build_maintenance_batch_job(platform.deployment_name)

    @dg.run_status_sensor(
        name=names.name("post_maintenance_health_sensor"),
        run_status=dg.DagsterRunStatus.SUCCESS,
        request_job=build_health_sync_job(platform.deployment_name),
        default_status=default,
        minimum_interval_seconds=platform.maintenance_interval_seconds,
        description="A health sync of the tables a successful run just maintained (any job that "
        "materialized maintained_table); the fleet refresh follows the health sync.",
    )
    def post_maintenance_health_sensor(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
        run_id = context.dagster_run.run_id
        if context.dagster_run.job_name == batch_job.name:
            return dg.SkipReason(
                f"run {run_id} is a maintenance batch: it measured the tables it changed again and "
                "recorded their status and health itself"
            )
        changed, unchanged = maintained_tables(context.instance, names, run_id)
        if not changed:
            why = f"changed nothing in {', '.join(unchanged)}" if unchanged else "maintained no table"
            return dg.SkipReason(f"run {run_id} {why}")
        return dg.RunRequest(
            run_key=f"post-maintenance:{run_id}",
            run_config=health_sync_run_config(changed, "all", names),
            tags=deployment_tags(platform) | batch_tags(changed),
        )

    return post_maintenance_health_sensor
