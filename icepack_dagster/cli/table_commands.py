"""The read-only commands: which tables there are, and what icepack measures, judges and recommends
for one of them. None of them changes a table or starts Spark."""

from __future__ import annotations

import sys

import click

from icepack_dagster.cli.context import (
    EXIT_FAILED,
    CommandContext,
    emit,
    emit_table_result,
    json_option,
    pass_ctx,
)
from icepack_dagster.cli.presentation import (
    format_accuracy,
    format_health,
    format_policy,
    format_recommendation,
    format_status,
    format_unreferenced,
)


@click.command()
@json_option
@pass_ctx
def tables(ctx: CommandContext, as_json: bool) -> None:
    """List the tables of every configured catalog (include/exclude patterns applied)."""
    result = ctx.engine.discover()
    names = [ctx.engine.display_name(k) for k in result.tables]
    for failure in result.failures:
        where = ".".join(failure.namespace) or "(catalog root)"
        click.echo(f"warning: could not list {failure.catalog}:{where}: {failure.error}", err=True)
    emit(names, as_json, lambda: "\n".join(names) if names else "(no tables)")
    if not result.complete:
        sys.exit(EXIT_FAILED)


@click.command()
@click.argument("table")
@json_option
@pass_ctx
def status(ctx: CommandContext, table: str, as_json: bool) -> None:
    """Measure TABLE from its Iceberg metadata (no Spark)."""
    key = ctx.engine.resolve(table)
    emit_table_result(ctx.engine, key, ctx.engine.status(key), as_json, format_status)


@click.command()
@click.argument("table")
@json_option
@pass_ctx
def health(ctx: CommandContext, table: str, as_json: bool) -> None:
    """Judge TABLE's health (healthy, warning, critical) with the issues found."""
    key = ctx.engine.resolve(table)
    emit_table_result(ctx.engine, key, ctx.engine.health(ctx.engine.status(key)), as_json, format_health)


@click.command()
@click.argument("table")
@json_option
@pass_ctx
def recommend(ctx: CommandContext, table: str, as_json: bool) -> None:
    """Which maintenance TABLE needs now, in order, and why; and why not the rest."""
    key = ctx.engine.resolve(table)
    emit_table_result(ctx.engine, key, ctx.engine.recommend(key), as_json, format_recommendation)


@click.command()
@click.argument("table")
@json_option
@pass_ctx
def unreferenced(ctx: CommandContext, table: str, as_json: bool) -> None:
    """Files under TABLE's location that no metadata references, split by its orphan age (no Spark)."""
    key = ctx.engine.resolve(table)
    emit_table_result(ctx.engine, key, ctx.engine.unreferenced_files(key), as_json, format_unreferenced)


@click.command()
@click.argument("table")
@click.option("--explain", is_flag=True, help="Show the layer that set each value.")
@json_option
@pass_ctx
def policy(ctx: CommandContext, table: str, explain: bool, as_json: bool) -> None:
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
    emit(data, as_json, lambda: format_policy(ctx.engine.display_name(key), effective, explain))


@click.command()
@click.argument("table", required=False)
@json_option
@pass_ctx
def accuracy(ctx: CommandContext, table: str | None, as_json: bool) -> None:
    """Predicted against done files and bytes per action, across the fleet (or for TABLE)."""
    key = ctx.engine.resolve(table) if table else None
    rows = ctx.engine.accuracy(key)
    emit([row.model_dump(mode="json") for row in rows], as_json, lambda: format_accuracy(rows))


@click.command("config")
@pass_ctx
def show_config(ctx: CommandContext) -> None:
    """Show the effective settings, secrets masked."""
    click.echo(ctx.engine.settings.model_dump_json(indent=2))


TABLE_COMMANDS = (tables, status, health, recommend, unreferenced, policy, accuracy, show_config)
