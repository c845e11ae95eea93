"""The `maintenance_batch` job: one run maintains several small tables one after the other in one
Spark session (`domain/decisions/maintenance_batches.py` says which tables share a run, `batch_maintenance.py`
what the run does), and the run requests the maintenance sensor makes for it.

A batch run is a maintenance run like any other for the queue and the sensor's caps (`icepack/kind`:
maintenance; its op takes a slot of the `icepack_maintenance` pool, as `maintained_table` does); it
lists its tables in its run config and in the `icepack/batch_tables` tag, which the
sensor reads to leave those tables alone while the run is queued or running.
"""

import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES, DeploymentNames
from icepack_dagster.defs.maintenance.batch_maintenance import maintain_batch
from icepack_dagster.defs.resources import IcepackResource, SparkResource, icepack_of, spark_of
from icepack_dagster.defs.run_tags import (
    KIND_TAG,
    MAINTENANCE,
    MAX_RETRIES_TAG,
    PRIORITY_TAG,
    RETRY_ON_FAILURE_TAG,
    batch_tags,
    deployment_tags,
)
from icepack_dagster.domain.decisions.maintenance_batches import PlannedRun, is_small, plan_runs
from icepack_dagster.domain.decisions.maintenance_selection import Decision, run_priority
from icepack_dagster.store.table_facts import MeasuredTable

BATCH_TABLES_TAG = "icepack/batch_tables"
BATCH_JOB = "maintenance_batch"
MAINTAIN_TABLES_OP = "maintain_tables"


class MaintenanceBatchConfig(dg.Config):
    """Which tables one batch run maintains, in order."""

    tables: list[str] = Field(min_length=1, description="Tables to maintain: iceberg_tables partition keys")


def maintain_tables_op(
    context: dg.OpExecutionContext,
    config: MaintenanceBatchConfig,
    icepack: IcepackResource,
    spark: SparkResource,
) -> None:
    """Maintain each table of the batch in this run's one Spark session; one table's failure is
    recorded for that table and the run goes on with the next."""
    maintain_batch(context, icepack, spark, config.tables)


@functools.cache
def build_maintenance_batch_job(deployment_name: str) -> dg.JobDefinition:
    """The job whose op holds a slot of the deployment's maintenance pool, the same cap as one-table
    maintenance runs (one definition per deployment name)."""
    platform = PlatformSettings(deployment_name=deployment_name)
    names = DeploymentNames(deployment_name)

    @dg.op(
        name=names.name(MAINTAIN_TABLES_OP),
        pool=platform.maintenance_pool,
        required_resource_keys={names.icepack_resource, names.spark_resource},
        description=inspect.getdoc(maintain_tables_op),
    )
    def maintain(context: dg.OpExecutionContext, config: MaintenanceBatchConfig) -> None:
        maintain_tables_op(context, config, icepack_of(context, names), spark_of(context, names))

    @dg.job(
        name=names.name(BATCH_JOB),
        tags={KIND_TAG: MAINTENANCE} | deployment_tags(platform),
        executor_def=dg.in_process_executor,  # one op: a step process would add a Python start and an import
        description="Recommend and run maintenance for several small tables in one run and one Spark "
        "session (run config: tables); per table a maintenance_recommendation and a maintained_table "
        "materialization and a healthy_after_maintenance result.",
    )
    def maintenance_batch_job() -> None:
        maintain()

    return maintenance_batch_job


def batch_tables(tags: Mapping[str, str]) -> list[str]:
    """The tables a batch run's tags name (none for any other run)."""
    raw = tags.get(BATCH_TABLES_TAG)
    return list(json.loads(raw)) if raw else []


def batch_run_request(run: PlannedRun, names: DeploymentNames) -> dg.RunRequest:
    """A batch run over `run`'s tables; its run key names the tables and their health events, so a
    restarted daemon never launches the same batch twice; a run of deployment `names`' batch job."""
    tables = [d.partition for d in run.decisions]
    events = ",".join(f"{d.partition}:{d.health_event}" for d in run.decisions)
    digest = hashlib.sha256(events.encode()).hexdigest()[:16]
    tags = {
        KIND_TAG: MAINTENANCE,
        MAX_RETRIES_TAG: "1",
        RETRY_ON_FAILURE_TAG: "false",
        BATCH_TABLES_TAG: json.dumps(tables),
        **batch_tags(tables),
        **run.decisions[0].run_tags,  # the smallest tier's sizing, when run sizing is on
        PRIORITY_TAG: str(run_priority(run.decisions)),
    }
    return dg.RunRequest(
        run_key=f"maintain-batch:{tables[0]}:{digest}",
        job_name=names.name(BATCH_JOB),
        run_config=batch_run_config(tables, names),
        tags=tags,
    )


def batch_run_config(tables: list[str], names: DeploymentNames = DEFAULT_NAMES) -> dict[str, Any]:
    return {"ops": {names.name(MAINTAIN_TABLES_OP): {"config": {"tables": tables}}}}


def plan_batches(
    read_facts: Callable[[Sequence[str]], Mapping[str, MeasuredTable]],
    launchable: list[Decision],
    run_slots: int,
    platform: PlatformSettings,
) -> tuple[list[PlannedRun], list[Decision]]:
    """The maintenance sensor's runs when batching is on: tables of the smallest sizing tier (by
    their latest recorded status, `read_facts`) share batch runs; every other table, or one without a
    readable status, gets a run of its own."""
    sizing = platform.sizing_policy()
    small = set()
    for partition, facts in read_facts([d.partition for d in launchable]).items():
        if facts.status is not None and is_small(facts.status, sizing):
            small.add(partition)
    return plan_runs(launchable, frozenset(small), run_slots, platform.maintenance_batch_size)
