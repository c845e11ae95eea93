"""The `housekeeping` job: one op that deletes finished Dagster runs past `run_retention_days` and
prunes icepack's maintenance history past `history_retention_days` (what `icepack history prune`
does), reporting both as typed metadata so the run page shows what went and what is left."""


from datetime import timedelta

import dagster as dg

from icepack_dagster.defs.housekeeping.run_retention import delete_finished_runs
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.run_tags import observation_tags
from icepack_dagster.domain.clock import utc_now

RUNS_DELETED = "runs_deleted"
MORE_RUNS_LEFT = "expired_runs_left"
HISTORY_ROWS_PRUNED = "history_rows_pruned"


@dg.op(description="Delete finished runs past run_retention_days; prune history past history_retention_days")
def delete_old_runs_and_history(context: dg.OpExecutionContext, icepack: IcepackResource) -> dg.Output[None]:
    settings = icepack.settings
    now = utc_now()
    runs = delete_finished_runs(context.instance, now - timedelta(days=settings.platform.run_retention_days))
    context.log.info(
        f"deleted {runs.deleted} finished run(s) last updated before {runs.cutoff.isoformat()}; "
        + ("more are left for the next housekeeping" if runs.more_left else "none is left")
    )
    pruned = icepack.engine.prune_history(now)
    days = settings.history_retention_days
    context.log.info(f"pruned {pruned} maintenance history row(s) older than {days} days")
    return dg.Output(
        None,
        metadata={
            RUNS_DELETED: dg.MetadataValue.int(runs.deleted),
            MORE_RUNS_LEFT: dg.MetadataValue.bool(runs.more_left),
            HISTORY_ROWS_PRUNED: dg.MetadataValue.int(pruned),
            "run_cutoff": dg.MetadataValue.text(runs.cutoff.isoformat()),
        },
    )


@dg.job(
    name="housekeeping",
    tags=observation_tags(),
    description="Delete finished Dagster runs past run_retention_days and prune maintenance history past "
    "history_retention_days.",
)
def housekeeping_job() -> None:
    delete_old_runs_and_history()
