"""A code location whose one job runs one op that does nothing, as `health_sync` does its work: one
op, the in-process executor. Launched on the same deployment as icepack's runs, its run costs what
Dagster itself costs a run (the run process, importing Dagster, the instance, the run's events and
compute logs), so that cost can be told apart from icepack's (`bench/health_sync_run.py`)."""

import dagster as dg


@dg.op
def do_nothing() -> None:
    """Nothing: whatever the run costs is Dagster's."""


@dg.job(executor_def=dg.in_process_executor)
def trivial() -> None:
    do_nothing()


defs = dg.Definitions(jobs=[trivial])
