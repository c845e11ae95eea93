"""Run tags and the run filters over them: the contract between the sensors, the run queue, and anyone
filtering runs in the UI. On an instance shared with other teams, icepack finds its own runs by tags
only its runs carry, in run storage (never by reading every run), and never needs an instance-wide
limit on a tag other runs carry.

Every run a sensor or schedule of icepack requests carries `icepack/deployment=<deployment_name>`; a
run of icepack's assets launched by a person (Materialize, a backfill: Dagster's `__ASSET_JOB`, which
carries no job tags) is given icepack's tags when its first step starts (`claim_run`). Before that, a
queued maintenance run is found by its pool: Dagster stores, with every run, a tag per concurrency
pool its steps use (`.dagster/pool/<pool>`), and the deployment's maintenance pool is used by
`maintained_table` and the batch op alone, from every launch path. `icepack/kind` separates
maintenance from observation; `icepack/outcome`, added when a maintenance ends, shows in the runs
list what it did, or why it did nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.domain.sizing.run_sizing import K8S_CONFIG_TAG

DEPLOYMENT_TAG = "icepack/deployment"
TABLE_TAG = "icepack/table"
KIND_TAG = "icepack/kind"
MAINTENANCE = "maintenance"
OBSERVATION = "observation"
HEALTH_EVENT_TAG = "icepack/health_event"
OUTCOME_TAG = "icepack/outcome"
MAINTENANCE_POOL = PlatformSettings().maintenance_pool  # the default deployment's
BATCH_TAG = "icepack/batch"
# Dagster's own run tags (public names in its docs): retries, the partition of a one-partition run, the
# queue's priority (higher is dequeued first; default 0), and the schedule or sensor that requested a
# run (its daemon adds it to every run a tick requests).
MAX_RETRIES_TAG = "dagster/max_retries"
PARTITION_TAG = "dagster/partition"
PRIORITY_TAG = "dagster/priority"
RETRY_ON_FAILURE_TAG = "dagster/retry_on_asset_or_op_failure"
SCHEDULE_NAME_TAG = "dagster/schedule_name"
SENSOR_NAME_TAG = "dagster/sensor_name"
# Dagster stores with each run one tag per concurrency pool its steps use (hidden in the UI).
_POOL_TAG_PREFIX = ".dagster/pool/"


def maintenance_tags(partition: str, health_event: int | None = None) -> dict[str, str]:
    """Tags of one table's maintenance run. A crashed run worker is retried once; a failed maintenance
    is not (it is recorded in history and counts towards quarantine instead)."""
    tags = {
        TABLE_TAG: partition,
        KIND_TAG: MAINTENANCE,
        MAX_RETRIES_TAG: "1",
        RETRY_ON_FAILURE_TAG: "false",
    }
    if health_event is not None:
        tags[HEALTH_EVENT_TAG] = str(health_event)
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


def deployment_tags(platform: PlatformSettings) -> dict[str, str]:
    """The tag every run of this deployment carries."""
    return {DEPLOYMENT_TAG: platform.deployment_name}


def own_runs(
    platform: PlatformSettings,
    statuses: Sequence[dg.DagsterRunStatus] | None = None,
    tags: dict[str, str] | None = None,
    **fields: Any,
) -> dg.RunsFilter:
    """This deployment's runs (in `statuses`, with `tags`, when given), as run storage selects them."""
    return dg.RunsFilter(
        tags=deployment_tags(platform) | (tags or {}),
        statuses=list(statuses) if statuses is not None else None,
        **fields,
    )


def pool_runs(
    platform: PlatformSettings, statuses: Sequence[dg.DagsterRunStatus], tags: dict[str, str] | None = None
) -> dg.RunsFilter:
    """Runs that need a slot of this deployment's maintenance pool: every maintenance run, whoever
    launched it (the sensor's, Materialize, a backfill, the launchpad), from its creation on."""
    pool = {f"{_POOL_TAG_PREFIX}{platform.maintenance_pool}": "true"}
    return dg.RunsFilter(tags=pool | (tags or {}), statuses=list(statuses))


def runs_maintaining(
    instance: dg.DagsterInstance, platform: PlatformSettings, statuses: Sequence[dg.DagsterRunStatus]
) -> list[dg.DagsterRun]:
    """This deployment's maintenance runs in `statuses`, whoever launched them: one query, in storage."""
    return [r.dagster_run for r in instance.get_run_records(pool_runs(platform, statuses))]


def claim_run(
    context: dg.OpExecutionContext | dg.AssetExecutionContext, platform: PlatformSettings, kind: str,
    table: str | None = None,
) -> None:
    """Give a run that a person launched (Materialize and backfills run Dagster's `__ASSET_JOB`, which
    carries no job tags) the tags icepack's own runs carry, when its step starts, so housekeeping and
    every run query of icepack find it. A run that already carries them is left as it is."""
    tags = deployment_tags(platform) | {KIND_TAG: kind} | ({TABLE_TAG: table} if table is not None else {})
    missing = {key: value for key, value in tags.items() if key not in context.run.tags}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)


def table_of_run(run: dg.DagsterRun) -> str | None:
    """The table a one-table run maintains: icepack's tag, else the run's partition."""
    return run.tags.get(TABLE_TAG) or run.tags.get(PARTITION_TAG)
