"""The `release_quarantine_job`: an operator lets automatic maintenance resume for one table."""

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
    """Resets a quarantined table's failure count, so the maintenance sensor considers it again."""
    claim_run(context, icepack.settings.platform, "operator")
    engine = icepack.engine
    key = engine.resolve(config.table)
    before = engine.history(key)
    engine.release_quarantine(key)
    context.log.info(
        f"{key.text}: released (was {'quarantined' if before.quarantined else 'not quarantined'}, "
        f"{before.consecutive_failures} consecutive failures, last error: {before.last_error})"
    )


@dg.job(tags={KIND_TAG: "operator"}, description="Release one table from quarantine (config: table).")
def release_quarantine_job() -> None:
    release_quarantine()
