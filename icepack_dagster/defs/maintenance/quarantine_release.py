"""The operator's jobs on a table whose maintenance stopped: `release_quarantine_job` lets automatic
maintenance resume for one table; `rollback_job` undoes its last maintenance, guarded as `icepack
rollback` is (only when nothing else committed since), or with `dry_run` only says what it would do."""

import dagster as dg
from pydantic import Field

from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.run_tags import KIND_TAG, claim_run


class ReleaseQuarantineConfig(dg.Config):
    table: str = Field(min_length=1, description="The table to release: ns.table or catalog.ns.table")


@dg.op
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


@dg.job(
    tags={KIND_TAG: "operator"},
    description="Release one table from quarantine and its circuit breakers (config: table).",
)
def release_quarantine_job() -> None:
    release_quarantine()


class RollbackConfig(dg.Config):
    table: str = Field(min_length=1, description="The table to roll back: ns.table or catalog.ns.table")
    dry_run: bool = Field(default=False, description="Only say what the rollback would do")


@dg.op
def rollback_table(context: dg.OpExecutionContext, config: RollbackConfig, icepack: IcepackResource) -> None:
    """Restores the snapshot the table's last maintenance was planned on, or fails saying what else was
    committed since; recorded in the maintenance history."""
    engine = icepack.engine
    plan = engine.rollback(engine.resolve(config.table), dry_run=config.dry_run)
    if plan.refused is not None:
        raise dg.Failure(description=plan.describe(), allow_retries=False)
    context.log.info(plan.describe())


@dg.job(
    tags={KIND_TAG: "operator"}, description="Undo one table's last maintenance (config: table, dry_run)."
)
def rollback_job() -> None:
    rollback_table()
