"""`maintenance_recommendation`: what one table should get now, and why each other action is left out."""

import functools
import inspect

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.maintenance.table_guard import discovered_table
from icepack_dagster.defs.materialization_codec import Metadata, recommendation_metadata
from icepack_dagster.defs.partitions import tables_partitions
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import MAINTENANCE, claim_run
from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import explain_policy, in_window
from icepack_dagster.domain.recommendation.model import Recommendation, SkippedAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import TABLE_GONE, Engine
from icepack_dagster.exceptions import TableNotFoundError


@functools.cache
def build_maintenance_recommendation(deployment_name: str) -> dg.AssetsDefinition:
    """The asset over the deployment's partitions (one definition per deployment name)."""
    platform = PlatformSettings(deployment_name=deployment_name)
    names = DeploymentNames(deployment_name)

    @dg.asset(
        key=names.maintenance_recommendation,
        partitions_def=tables_partitions(platform),
        deps=[names.table_health],
        group_name="iceberg_tables",
        kinds={"iceberg"},
        required_resource_keys={names.icepack_resource},
        description=inspect.getdoc(maintenance_recommendation),
    )
    def recommendation_asset(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return maintenance_recommendation(context, icepack_of(context, names))

    return recommendation_asset


def maintenance_recommendation(
    context: dg.AssetExecutionContext, icepack: IcepackResource
) -> dg.MaterializeResult:
    """The actions this table needs now, in order, with reasons, expected gain and priority; every
    action left out names why (policy, cadence, quarantine, nothing to gain).

    Grain: one materialization per maintenance run of the table. It re-reads the table's metadata, so
    maintenance plans on the table as it is now, not as it was at the last health sync. An invalid
    policy fails the run with a message naming the table and the field; a partition key that is not a
    discovered table is refused before anything is read.
    """
    engine = icepack.engine
    claim_run(context, icepack.settings.platform, MAINTENANCE, context.partition_key)
    key = discovered_table(context, engine)
    names = DeploymentNames.of(icepack.settings.platform)
    recommendation, metadata = recommend_now(engine, key, context.log, names)
    if recommendation is not None:
        context.log.info(
            f"{key.text}: {len(recommendation.actions)} action(s), {len(recommendation.skipped)} left out"
            + (" (quarantined)" if metadata["quarantined"].value else "")
        )
    return dg.MaterializeResult(metadata=metadata)


def recommend_now(
    engine: Engine, key: TableKey, log: dg.DagsterLogManager, names: DeploymentNames
) -> tuple[Recommendation | None, Metadata]:
    """The recommendation for `key` on its status now, and the metadata of its materialization (what
    a one-table run and each table of a batch run write); None, with metadata saying why, when the
    table is gone. An invalid policy raises InvalidPolicyError naming the table and the field. Only a
    gone table is logged (a warning): a one-table run also logs what was recommended, a batch run does
    not (its materialization says it, and each line is an event the run stores, per table)."""
    now = utc_now()
    try:
        status = engine.status(key, now)
    except TableNotFoundError as error:
        return None, _table_gone(log, key.text, engine.history(key), f"{TABLE_GONE}: {error}")
    health = engine.health(status)
    effective = engine.policy(key, status.properties)
    history = engine.history(key, effective.policy)
    recommendation = engine.recommend(key, status=status, health=health, now=now)
    policy_rows = [
        dg.TableRecord({"field": field, "value": str(value), "source": source})
        for field, value, source in explain_policy(effective)
    ]
    metadata = recommendation_metadata(recommendation, history)
    metadata |= {
        "health_state": dg.MetadataValue.text(health.state.value),
        "health_state_rank": dg.MetadataValue.int(health.state.plot_value),
        "in_window": dg.MetadataValue.bool(in_window(effective.policy, now)),
        "policy": dg.MetadataValue.table(
            policy_rows,
            schema=dg.TableSchema(
                columns=[dg.TableColumn("field"), dg.TableColumn("value"), dg.TableColumn("source")]
            ),
        ),
        "health": dg.MetadataValue.asset(names.table_health),
    }
    return recommendation, metadata


def _table_gone(log: dg.DagsterLogManager, table: str, history: TableHistory, reason: str) -> Metadata:
    """The table was dropped since its last health sync: recommend nothing, say why, end cleanly."""
    log.warning(f"{table}: {reason}")
    recommendation = Recommendation(
        table=table, skipped=tuple(SkippedAction(action=a, reason=reason) for a in ACTION_ORDER)
    )
    return recommendation_metadata(recommendation, history) | {"table_gone": dg.MetadataValue.text(reason)}
