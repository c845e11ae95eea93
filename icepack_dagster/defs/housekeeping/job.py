"""The `housekeeping` job: one op that prunes icepack's maintenance history past
`history_retention_days` (what `icepack history prune` does) and, only with `delete_old_runs` on,
deletes this deployment's own finished Dagster runs past `run_retention_days`, reporting both as typed
metadata so the run page shows what went and what is left."""


import functools
import inspect
from datetime import timedelta

import dagster as dg

from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.housekeeping.run_retention import delete_finished_runs
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import OBSERVATION, claim_run, observation_tags
from icepack_dagster.domain.clock import utc_now

RUNS_DELETED = "runs_deleted"
MORE_RUNS_LEFT = "expired_runs_left"
HISTORY_ROWS_PRUNED = "history_rows_pruned"


def delete_old_runs_and_history(context: dg.OpExecutionContext, icepack: IcepackResource) -> dg.Output[None]:
    """Prune history past history_retention_days; with delete_old_runs, delete this deployment's
    finished runs past run_retention_days"""
    settings = icepack.settings
    platform = settings.platform
    claim_run(context, platform, OBSERVATION)
    now = utc_now()
    metadata: dict[str, dg.MetadataValue] = {}
    if platform.delete_old_runs:
        cutoff = now - timedelta(days=platform.run_retention_days)
        runs = delete_finished_runs(context.instance, platform, cutoff)
        context.log.info(
            f"deleted {runs.deleted} finished run(s) of deployment {platform.deployment_name!r} last updated "
            f"before {runs.cutoff.isoformat()}; "
            + ("more are left for the next housekeeping" if runs.more_left else "none is left")
        )
        metadata = {
            RUNS_DELETED: dg.MetadataValue.int(runs.deleted),
            MORE_RUNS_LEFT: dg.MetadataValue.bool(runs.more_left),
            "run_cutoff": dg.MetadataValue.text(runs.cutoff.isoformat()),
        }
    else:
        context.log.info("no run deleted: delete_old_runs is off (ICEPACK_PLATFORM_DELETE_OLD_RUNS)")
    pruned = icepack.engine.prune_history(now)
    days = settings.history_retention_days
    context.log.info(f"pruned {pruned} maintenance history row(s) older than {days} days")
    return dg.Output(None, metadata={**metadata, HISTORY_ROWS_PRUNED: dg.MetadataValue.int(pruned)})


@functools.cache
def build_housekeeping_job(deployment_name: str) -> dg.JobDefinition:
    """The deployment's housekeeping job (one definition per deployment name)."""
    names = DeploymentNames(deployment_name)

    @dg.op(
        name=names.name("delete_old_runs_and_history"),
        required_resource_keys={names.icepack_resource},
        description=inspect.getdoc(delete_old_runs_and_history),
    )
    def housekeeping_op(context: dg.OpExecutionContext) -> dg.Output[None]:
        return delete_old_runs_and_history(context, icepack_of(context, names))

    @dg.job(
        name=names.name("housekeeping"),
        tags=observation_tags(),
        description="Prune maintenance history past history_retention_days; with delete_old_runs on, "
        "delete this deployment's finished Dagster runs past run_retention_days.",
    )
    def housekeeping_job() -> None:
        housekeeping_op()

    return housekeeping_job
