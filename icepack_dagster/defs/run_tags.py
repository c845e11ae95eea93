"""Run tags and the run filters over them: the contract between the sensors, the queued run
coordinator's limits in dagster.yaml, and anyone filtering runs in the UI.

Dagster tags every one-partition run `dagster/partition=<table>`, whoever launched it (sensor,
Materialize, launchpad, backfill, GraphQL): its limit of 1 per unique value makes runs of one table
exclusive. The maintenance cap is the `icepack_maintenance` pool of `maintained_table` (granularity
run: a run waits in the queue for a slot). `icepack/kind` separates maintenance from observation so
status and health runs never wait behind maintenance; `icepack/outcome`, added when a maintenance
ends, shows in the runs list what it did, or why it did nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import dagster as dg

from icepack_dagster.defs.asset_keys import MAINTAINED_TABLE
from icepack_dagster.domain.sizing.run_sizing import K8S_CONFIG_TAG

TABLE_TAG = "icepack/table"
KIND_TAG = "icepack/kind"
MAINTENANCE = "maintenance"
OBSERVATION = "observation"
HEALTH_EVENT_TAG = "icepack/health_event"
OUTCOME_TAG = "icepack/outcome"
MAINTENANCE_POOL = "icepack_maintenance"
BATCH_TAG = "icepack/batch"
# Dagster's own run tags (public names in its docs): retries, the partition of a one-partition run, and
# the schedule that requested a run (its scheduler adds it to every run a tick requests).
MAX_RETRIES_TAG = "dagster/max_retries"
PARTITION_TAG = "dagster/partition"
RETRY_ON_FAILURE_TAG = "dagster/retry_on_asset_or_op_failure"
SCHEDULE_NAME_TAG = "dagster/schedule_name"


def maintenance_tags(partition: str, health_storage_id: int | None = None) -> dict[str, str]:
    """Tags of one table's maintenance run. A crashed run worker is retried once; a failed maintenance
    is not (it is recorded in history and counts towards quarantine instead)."""
    tags = {
        TABLE_TAG: partition,
        KIND_TAG: MAINTENANCE,
        MAX_RETRIES_TAG: "1",
        RETRY_ON_FAILURE_TAG: "false",
    }
    if health_storage_id is not None:
        tags[HEALTH_EVENT_TAG] = str(health_storage_id)
    return tags


# Observation runs never call the Kubernetes API: their pods mount no service-account token, although
# the chart's code-location context turns it on for every run (dagster-k8s applies this tag after it).
_NO_TOKEN = json.dumps({"pod_spec_config": {"automount_service_account_token": False}})


def observation_tags() -> dict[str, str]:
    """Tags of status/health/fleet runs: read-only, retried freely, never blocking maintenance, and
    without a Kubernetes API token."""
    return {KIND_TAG: OBSERVATION, MAX_RETRIES_TAG: "2", K8S_CONFIG_TAG: _NO_TOKEN}


def batch_tags(tables: Sequence[str]) -> dict[str, str]:
    """What a health-sync run covers, readable in the runs list (the run config lists every table)."""
    span = tables[0] if len(tables) == 1 else f"{tables[0]} .. {tables[-1]}"
    return {BATCH_TAG: f"{len(tables)} table(s): {span}"}


def maintenance_runs(
    table: str | None = None, statuses: Sequence[dg.DagsterRunStatus] | None = None
) -> dg.RunsFilter:
    """Maintenance runs (of one table, when given; in `statuses`, when given) as run storage selects them."""
    tags = {KIND_TAG: MAINTENANCE} | ({TABLE_TAG: table} if table is not None else {})
    return dg.RunsFilter(tags=tags, statuses=list(statuses) if statuses is not None else None)


def runs_maintaining(
    instance: dg.DagsterInstance, statuses: Sequence[dg.DagsterRunStatus]
) -> list[dg.DagsterRun]:
    """Maintenance runs in `statuses`, whoever launched them: the tagged runs of the maintenance jobs,
    and runs of any other job that select `maintained_table` (Materialize, the launchpad, a backfill,
    the GraphQL API), which carry only Dagster's own tags. One query over the runs in `statuses`."""
    runs = [r.dagster_run for r in instance.get_run_records(dg.RunsFilter(statuses=list(statuses)))]
    return [
        run
        for run in runs
        if run.tags.get(KIND_TAG) == MAINTENANCE or MAINTAINED_TABLE in (run.asset_selection or ())
    ]


def table_of_run(run: dg.DagsterRun) -> str | None:
    """The table a one-table run maintains: icepack's tag, else the run's partition."""
    return run.tags.get(TABLE_TAG) or run.tags.get(PARTITION_TAG)
