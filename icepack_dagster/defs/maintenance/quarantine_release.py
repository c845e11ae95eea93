"""The operator's jobs on a table whose maintenance stopped: `release_quarantine_job` lets automatic
maintenance resume for one table; `rollback_job` undoes its last maintenance, guarded as `icepack
rollback` is (only when nothing else committed since), or with `dry_run` only says what it would do."""

import functools
import inspect

import dagster as dg
from pydantic import Field

from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import KIND_TAG, claim_run


class ReleaseQuarantineConfig(dg.Config):
    table: str = Field(min_length=1, description="The table to release: ns.table or catalog.ns.table")


def release_quarantine(
    context: dg.OpExecutionContext, config: ReleaseQuarantineConfig, icepack: IcepackResource
) -> None:
    """Resets a quarantined table's failure count, so the maintenance sensor considers it again, and
    what its circuit breakers count (they count its rewrites from the release on)."""
    claim_run(context, icepack.settings.platform, "operator")
    engine = icepack.engine
    key = engine.resolve(config.table)
    before = engine.history(key)
    engine.release_quarantine(key)
    context.log.info(
        f"{key.text}: released (was {'quarantined' if before.quarantined else 'not quarantined'}, "
        f"{before.consecutive_failures} consecutive failures, last error: {before.last_error}; "
        f"{len(before.recent_rewrites)} rewrites of the last day counted by its circuit breakers)"
    )


@functools.cache
def build_release_quarantine_job(deployment_name: str) -> dg.JobDefinition:
    """The deployment's `release_quarantine_job` (one definition per deployment name)."""
    names = DeploymentNames(deployment_name)

    @dg.op(
        name=names.name("release_quarantine"),
        required_resource_keys={names.icepack_resource},
        description=inspect.getdoc(release_quarantine),
    )
    def release_quarantine_op(context: dg.OpExecutionContext, config: ReleaseQuarantineConfig) -> None:
        release_quarantine(context, config, icepack_of(context, names))

    @dg.job(
        name=names.name("release_quarantine_job"),
        tags={KIND_TAG: "operator"},
        description="Release one table from quarantine and its circuit breakers (config: table).",
    )
    def release_quarantine_job() -> None:
        release_quarantine_op()

    return release_quarantine_job


class RollbackConfig(dg.Config):
    table: str = Field(min_length=1, description="The table to roll back: ns.table or catalog.ns.table")
    dry_run: bool = Field(default=False, description="Only say what the rollback would do")


def rollback_table(context: dg.OpExecutionContext, config: RollbackConfig, icepack: IcepackResource) -> None:
    """Restores the snapshot the table's last maintenance was planned on, or fails saying what else was
    committed since; recorded in the maintenance history."""
    claim_run(context, icepack.settings.platform, "operator")
    engine = icepack.engine
    plan = engine.rollback(engine.resolve(config.table), dry_run=config.dry_run)
    if plan.refused is not None:
        raise dg.Failure(description=plan.describe(), allow_retries=False)
    context.log.info(plan.describe())


@functools.cache
def build_rollback_job(deployment_name: str) -> dg.JobDefinition:
    """The deployment's `rollback_job` (one definition per deployment name)."""
    names = DeploymentNames(deployment_name)

    @dg.op(
        name=names.name("rollback_table"),
        required_resource_keys={names.icepack_resource},
        description=inspect.getdoc(rollback_table),
    )
    def rollback_op(context: dg.OpExecutionContext, config: RollbackConfig) -> None:
        rollback_table(context, config, icepack_of(context, names))

    @dg.job(
        name=names.name("rollback_job"),
        tags={KIND_TAG: "operator"},
        description="Undo one table's last maintenance (config: table, dry_run).",
    )
    def rollback_job() -> None:
        rollback_op()

    return rollback_job
