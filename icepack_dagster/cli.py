"""The `icepack` command: the engine without Dagster, for people (tables of text) and machines (--json).

Exit codes: 0 done (or a dry run listed its work), 1 failed, 2 bad usage or configuration (an
ill-formed table name too), 3 nothing to do, 4 the named table is gone (not in its catalog: dropped,
or misspelt; nothing ran), 5 deferred (the catalog or storage kept failing transiently after retries,
or another maintenance holds the table; nothing ran; try again later), 6 no effect (an action ran but
did nothing where its prediction planned work). Table names are printed in the
form that reads back as exactly that table (domain/table_key.py).
Progress goes to stderr so that --json output stays clean on stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from icepack_dagster.domain.actions import MaintenanceAction
from icepack_dagster.domain.maintenance_report import MaintenanceReport
from icepack_dagster.domain.table_key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import (
    ConfigurationError,
    IcepackError,
    InvalidTableIdentifierError,
    MissingComponentError,
)
from icepack_dagster.presentation import (
    format_accuracy,
    format_health,
    format_policy,
    format_recommendation,
    format_report,
    format_status,
    format_unreferenced,
    report_json,
)
from icepack_dagster.settings import load_settings
from icepack_dagster.spark import jvm_artifacts
from icepack_dagster.store.state_database import redacted_url, upgrade_state_database

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING_TO_DO, EXIT_TABLE_GONE, EXIT_DEFERRED = 0, 1, 2, 3, 4, 5
EXIT_NO_EFFECT = 6  # an action ran but did nothing where its prediction planned work
ModelT = TypeVar("ModelT", bound=BaseModel)


def _progress(message: str) -> None:
    click.echo(f"… {message}", err=True)


def _emit(data: Any, as_json: bool, human: Callable[[], str]) -> None:
    click.echo(json.dumps(data, indent=2, default=str) if as_json else human())


class _Context:
    def __init__(self) -> None:
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(load_settings())
        return self._engine


pass_ctx = click.make_pass_decorator(_Context, ensure=True)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """icepack: measure, judge and maintain Apache Iceberg tables (no Dagster needed)."""


@cli.command()
@json_option
@pass_ctx
def tables(ctx: _Context, as_json: bool) -> None:
    """List the tables of every configured catalog (include/exclude patterns applied)."""
    result = ctx.engine.discover()
    names = [ctx.engine.display_name(k) for k in result.tables]
    for failure in result.failures:
        where = ".".join(failure.namespace) or "(catalog root)"
        click.echo(f"warning: could not list {failure.catalog}:{where}: {failure.error}", err=True)
    _emit(names, as_json, lambda: "\n".join(names) if names else "(no tables)")
    if not result.complete:
        sys.exit(EXIT_FAILED)


def _emit_table_result(
    engine: Engine, key: TableKey, result: ModelT, as_json: bool, human: Callable[[str, ModelT], str]
) -> None:
    """A read command's answer about one table: the model as JSON with the table's name, or as text."""
    name = engine.display_name(key)
    _emit(result.model_dump(mode="json") | {"table": name}, as_json, lambda: human(name, result))


@cli.command()
@click.argument("table")
@json_option
@pass_ctx
def status(ctx: _Context, table: str, as_json: bool) -> None:
    """Measure TABLE from its Iceberg metadata (no Spark)."""
    key = ctx.engine.resolve(table)
    _emit_table_result(ctx.engine, key, ctx.engine.status(key), as_json, format_status)


@cli.command()
@click.argument("table")
@json_option
@pass_ctx
def health(ctx: _Context, table: str, as_json: bool) -> None:
    """Judge TABLE's health (healthy, warning, critical) with the issues found."""
    key = ctx.engine.resolve(table)
    _emit_table_result(ctx.engine, key, ctx.engine.health(ctx.engine.status(key)), as_json, format_health)


@cli.command()
@click.argument("table")
@json_option
@pass_ctx
def recommend(ctx: _Context, table: str, as_json: bool) -> None:
    """Which maintenance TABLE needs now, in order, and why; and why not the rest."""
    key = ctx.engine.resolve(table)
    _emit_table_result(ctx.engine, key, ctx.engine.recommend(key), as_json, format_recommendation)


@cli.command()
@click.argument("table")
@json_option
@pass_ctx
def unreferenced(ctx: _Context, table: str, as_json: bool) -> None:
    """Files under TABLE's location that no metadata references, split by its orphan age (no Spark)."""
    key = ctx.engine.resolve(table)
    _emit_table_result(ctx.engine, key, ctx.engine.unreferenced_files(key), as_json, format_unreferenced)


@cli.command()
@click.argument("table")
@click.option("--explain", is_flag=True, help="Show the layer that set each value.")
@json_option
@pass_ctx
def policy(ctx: _Context, table: str, explain: bool, as_json: bool) -> None:
    """Show TABLE's effective maintenance policy (defaults, policy file, icepack.* properties, and the
    table's own Iceberg properties that bound it)."""
    key = ctx.engine.resolve(table)
    effective = ctx.engine.policy(key, ctx.engine.status(key).properties)
    data = {
        "table": ctx.engine.display_name(key),
        "policy": effective.policy.model_dump(mode="json"),
        "sources": effective.sources,
        "iceberg_properties": [item.model_dump(mode="json") for item in effective.iceberg],
    }
    _emit(data, as_json, lambda: format_policy(ctx.engine.display_name(key), effective, explain))


@cli.command()
@click.argument("table", required=False)
@click.option("--all", "all_tables", is_flag=True, help="Maintain every discovered table, one after another.")
@click.option("--dry-run", is_flag=True, help="Show exactly what would run; change nothing.")
@click.option(
    "--action",
    "actions",
    multiple=True,
    type=click.Choice([a.value for a in MaintenanceAction]),
    help="Only these actions (repeatable); each still needs to be recommended.",
)
@json_option
@pass_ctx
def maintain(
    ctx: _Context, table: str | None, all_tables: bool, dry_run: bool, actions: tuple[str, ...], as_json: bool
) -> None:
    """Run TABLE's recommended maintenance through Iceberg's Spark procedures."""
    if bool(table) == all_tables:
        raise click.UsageError("name one TABLE or pass --all")
    keys = list(ctx.engine.discover().tables) if all_tables else [ctx.engine.resolve(table or "")]
    only = [MaintenanceAction(a) for a in actions] or None
    reports = list(_maintain_each(ctx.engine, keys, dry_run, only))
    payload = [report_json(ctx.engine.display_name(k), r) for k, r in reports]
    _emit(
        payload if all_tables else payload[0],
        as_json,
        lambda: "\n\n".join(format_report(ctx.engine.display_name(k), r) for k, r in reports),
    )
    outcomes = {r.outcome for _, r in reports}
    if "failed" in outcomes:
        sys.exit(EXIT_FAILED)
    if "deferred" in outcomes:
        sys.exit(EXIT_DEFERRED)
    if outcomes == {"table_gone"} and not all_tables:
        sys.exit(EXIT_TABLE_GONE)
    if outcomes <= {"nothing_to_do", "table_gone"}:  # with --all, tables dropped since discovery
        sys.exit(EXIT_NOTHING_TO_DO)
    if "no_effect" in outcomes:
        sys.exit(EXIT_NO_EFFECT)


@cli.command()
@click.argument("table", required=False)
@json_option
@pass_ctx
def accuracy(ctx: _Context, table: str | None, as_json: bool) -> None:
    """Predicted against done files and bytes per action, across the fleet (or for TABLE)."""
    key = ctx.engine.resolve(table) if table else None
    rows = ctx.engine.accuracy(key)
    _emit([row.model_dump(mode="json") for row in rows], as_json, lambda: format_accuracy(rows))


def _maintain_each(
    engine: Engine, keys: list[TableKey], dry_run: bool, only: list[MaintenanceAction] | None
) -> Iterable[tuple[TableKey, MaintenanceReport]]:
    for index, key in enumerate(keys, start=1):
        name = engine.display_name(key)
        _progress(f"[{index}/{len(keys)}] {name}: {'planning' if dry_run else 'maintaining'}")
        yield key, engine.maintain(key, dry_run=dry_run, only=only, on_progress=_prefixed_progress(name))


def _prefixed_progress(name: str) -> Callable[[str], None]:
    return lambda message: _progress(f"{name}: {message}")


@cli.command()
@click.option("--namespace", default="demo", show_default=True)
@json_option
@pass_ctx
def demo(ctx: _Context, namespace: str, as_json: bool) -> None:
    """Create demo tables in realistically bad shape in the default catalog, through Spark."""
    from icepack_dagster.spark.demo_lakehouse import build_demo_lakehouse

    engine = ctx.engine
    catalog = engine.settings.primary_catalog
    engine.catalogs.get(catalog).create_namespace_if_not_exists(namespace)
    created = build_demo_lakehouse(engine.spark(), catalog, namespace, on_progress=_progress)
    _emit(created, as_json, lambda: "created:\n" + "\n".join(f"  {t}" for t in created))


@cli.group()
def quarantine() -> None:
    """See or release tables whose maintenance kept failing."""


@quarantine.command("show")
@click.argument("table")
@json_option
@pass_ctx
def quarantine_show(ctx: _Context, table: str, as_json: bool) -> None:
    """Show TABLE's maintenance history: consecutive failures, quarantine, last error."""
    key = ctx.engine.resolve(table)
    history = ctx.engine.history(key)
    _emit(
        history.model_dump(mode="json"),
        as_json,
        lambda: (
            f"{ctx.engine.display_name(key)}: {'QUARANTINED' if history.quarantined else 'active'}, "
            f"{history.consecutive_failures} consecutive failure(s)"
            + (f"\n  last error: {history.last_error}" if history.last_error else "")
        ),
    )


@quarantine.command("release")
@click.argument("table")
@pass_ctx
def quarantine_release(ctx: _Context, table: str) -> None:
    """Release TABLE: automatic maintenance resumes; its failure count starts again from zero."""
    key = ctx.engine.resolve(table)
    ctx.engine.release_quarantine(key)
    click.echo(f"{ctx.engine.display_name(key)}: released from quarantine")


@cli.group()
def history() -> None:
    """icepack's own maintenance history (the state database)."""


@history.command("prune")
@pass_ctx
def history_prune(ctx: _Context) -> None:
    """Delete history older than history_retention_days that quarantine and cadence no longer read."""
    removed = ctx.engine.prune_history()
    days = ctx.engine.settings.history_retention_days
    click.echo(f"pruned {removed} history rows older than {days} days")


@cli.group()
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
    _emit(data, as_json, human)


@cli.group()
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
    help="Also fetch Iceberg's REST catalog test server and its classpath (for the test suite).",
)
def jars_fetch(into: Path | None, test_server: bool) -> None:
    """Download each pinned jar that is missing or damaged, and check its SHA-256; print their paths."""
    spark = load_settings().spark
    artifacts = jvm_artifacts.ARTIFACTS
    if test_server:
        artifacts += jvm_artifacts.REST_CATALOG_TEST_SERVER
    paths = jvm_artifacts.fetch(
        artifacts, into or spark.jar_cache, spark.maven_repository, progress=_progress
    )
    for path in paths:
        click.echo(str(path))


@cli.command("config")
@pass_ctx
def show_config(ctx: _Context) -> None:
    """Show the effective settings, secrets masked."""
    click.echo(ctx.engine.settings.model_dump_json(indent=2))


def main() -> None:
    """Entry point: turns project errors into one readable line and an exit code."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_FAILED)
    except click.ClickException as error:
        error.show()
        sys.exit(EXIT_USAGE)
    except (ConfigurationError, MissingComponentError, InvalidTableIdentifierError) as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    except IcepackError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(EXIT_FAILED)
