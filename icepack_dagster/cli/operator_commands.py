"""The operator's commands: demo tables, quarantine, the guarded rollback, icepack's own history and state
database, and the pinned jars Spark loads."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from icepack_dagster.cli.context import EXIT_FAILED, CommandContext, emit, json_option, pass_ctx, progress
from icepack_dagster.config.settings import load_settings
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.spark import jvm_artifacts
from icepack_dagster.store.state_database import redacted_url, upgrade_state_database


@click.command()
@click.option("--namespace", default="demo", show_default=True)
@json_option
@pass_ctx
def demo(ctx: CommandContext, namespace: str, as_json: bool) -> None:
    """Create demo tables in realistically bad shape in the default catalog, through Spark."""
    from icepack_dagster.spark.demo_lakehouse import build_demo_lakehouse

    engine = ctx.engine
    catalog = engine.settings.primary_catalog
    engine.catalogs.get(catalog).create_namespace_if_not_exists(namespace)
    created = build_demo_lakehouse(engine.spark(), catalog, namespace, on_progress=progress)
    emit(created, as_json, lambda: "created:\n" + "\n".join(f"  {t}" for t in created))


@click.group()
def quarantine() -> None:
    """See or release tables whose maintenance kept failing."""


@quarantine.command("show")
@click.argument("table")
@json_option
@pass_ctx
def quarantine_show(ctx: CommandContext, table: str, as_json: bool) -> None:
    """Show TABLE's maintenance history: consecutive failures, quarantine, last error, and the rewrites a
    circuit breaker pauses (from its status now)."""
    key = ctx.engine.resolve(table)
    history = ctx.engine.history(key)
    try:
        paused = {str(action): reason for action, reason in ctx.engine.breaker_pauses(key).items()}
    except IcepackError as error:  # the history still shows; the breakers need the table's status
        paused = {"not read": str(error)}
    emit(
        history.model_dump(mode="json") | {"circuit_breakers": paused},
        as_json,
        lambda: (
            f"{ctx.engine.display_name(key)}: {'QUARANTINED' if history.quarantined else 'active'}, "
            f"{history.consecutive_failures} consecutive failure(s), "
            f"{history.consecutive_conflicts} conflict(s) with concurrent writers in a row"
            + (f"\n  paused: a commit broke an invariant: {history.violation}" if history.violation else "")
            + (f"\n  last error: {history.last_error}" if history.last_error else "")
            + (f"\n  last conflict: {history.last_conflict}" if history.last_conflict else "")
            + "".join(f"\n  {action} paused: {reason}" for action, reason in paused.items())
        ),
    )


@quarantine.command("release")
@click.argument("table")
@pass_ctx
def quarantine_release(ctx: CommandContext, table: str) -> None:
    """Release TABLE: automatic maintenance resumes; its failure count starts again from zero, and its
    circuit breakers count its rewrites from now on (the fleet's daily budget is not the table's)."""
    key = ctx.engine.resolve(table)
    ctx.engine.release_quarantine(key)
    click.echo(f"{ctx.engine.display_name(key)}: released from quarantine and its circuit breakers")


@click.command()
@click.argument("table")
@click.option("--dry-run", is_flag=True, help="Show exactly what it would do; change nothing.")
@json_option
@pass_ctx
def rollback(ctx: CommandContext, table: str, dry_run: bool, as_json: bool) -> None:
    """Undo TABLE's last maintenance: main goes back to the snapshot it was planned on, only when nothing
    else has committed since (else it refuses and lists what happened since). Recorded in the history;
    a paused table stays paused until `icepack quarantine release`."""
    key = ctx.engine.resolve(table)
    plan = ctx.engine.rollback(key, dry_run=dry_run)
    emit(plan.model_dump(mode="json"), as_json, plan.describe)
    if plan.refused is not None:
        sys.exit(EXIT_FAILED)


@click.group()
def history() -> None:
    """icepack's own maintenance history (the state database)."""


@history.command("prune")
@pass_ctx
def history_prune(ctx: CommandContext) -> None:
    """Delete history older than history_retention_days that quarantine and cadence no longer read."""
    removed = ctx.engine.prune_history()
    days = ctx.engine.settings.history_retention_days
    click.echo(f"pruned {removed} history rows older than {days} days")


@click.group()
def state() -> None:
    """icepack's state database (history, table leases, manifest summaries)."""


@state.command("upgrade")
@json_option
def state_upgrade(as_json: bool) -> None:
    """Migrate the state database to this icepack's newest schema revision (nothing when it is there).
    Every icepack process also does this when it first opens the database; run it before a rollout to
    migrate once, ahead of the pods."""
    url = load_settings().resolved_state_url
    result = upgrade_state_database(url)
    where = f"state database {redacted_url(url)}"

    def human() -> str:
        if not result.changed:
            return f"{where}: already at schema revision {result.after}, nothing to do"
        before = result.before or ("none (written before migrations)" if result.adopted else "none (new)")
        return f"{where}: upgraded from schema revision {before} to {result.after}"

    data = {
        "before": result.before,
        "after": result.after,
        "changed": result.changed,
        "adopted": result.adopted,
    }
    emit(data, as_json, human)


@click.group()
def jars() -> None:
    """The pinned Maven Central jars that Spark sessions load (icepack_dagster/spark/jvm_artifacts.py)."""


@jars.command("fetch")
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to fill instead of the jar cache (spark.jar_cache), e.g. an image's jar folder.",
)
@click.option(
    "--test-server",
    is_flag=True,
    help="Also fetch the test suite's jars: Iceberg's REST catalog test server and its classpath, and an "
    "older Iceberg runtime.",
)
def jars_fetch(into: Path | None, test_server: bool) -> None:
    """Download each pinned jar that is missing or damaged, and check its SHA-256; print their paths."""
    spark = load_settings().spark
    artifacts = jvm_artifacts.ARTIFACTS
    if test_server:
        artifacts += jvm_artifacts.TEST_SUITE_JARS
    paths = jvm_artifacts.fetch(
        artifacts, into or spark.jar_cache, spark.maven_repository, progress=progress
    )
    for path in paths:
        click.echo(str(path))


OPERATOR_COMMANDS = (demo, quarantine, rollback, history, state, jars)
