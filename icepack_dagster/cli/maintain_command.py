"""`icepack maintain`: one table's (or every table's) recommended maintenance through Iceberg's Spark
procedures, and the exit code that says what came of it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

import click

from icepack_dagster.cli.context import (
    EXIT_CONFLICT,
    EXIT_DEFERRED,
    EXIT_FAILED,
    EXIT_NO_EFFECT,
    EXIT_NOTHING_TO_DO,
    EXIT_REFUSED,
    EXIT_TABLE_GONE,
    EXIT_VIOLATED,
    CommandContext,
    emit,
    json_option,
    pass_ctx,
    progress,
)
from icepack_dagster.cli.presentation import format_report, report_json
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine


@click.command()
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
    ctx: CommandContext,
    table: str | None,
    all_tables: bool,
    dry_run: bool,
    actions: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run TABLE's recommended maintenance through Iceberg's Spark procedures."""
    if bool(table) == all_tables:
        raise click.UsageError("name one TABLE or pass --all")
    keys = list(ctx.engine.discover().tables) if all_tables else [ctx.engine.resolve(table or "")]
    only = [MaintenanceAction(a) for a in actions] or None
    with ctx.engine.table_sessions.shared():  # one Spark session for table after table
        reports = list(_maintain_each(ctx.engine, keys, dry_run, only))
    payload = [report_json(ctx.engine.display_name(k), r) for k, r in reports]
    emit(
        payload if all_tables else payload[0],
        as_json,
        lambda: "\n\n".join(format_report(ctx.engine.display_name(k), r) for k, r in reports),
    )
    exit_code = _exit_code({r.outcome for _, r in reports}, all_tables)
    if exit_code:
        sys.exit(exit_code)


def _exit_code(outcomes: set[str], all_tables: bool) -> int:
    """The worst outcome decides: a broken invariant over a failure over a runtime refusal over a conflict
    over a deferral over a gone table over nothing to do."""
    if "violated" in outcomes:
        return EXIT_VIOLATED
    if "failed" in outcomes:
        return EXIT_FAILED
    if "refused" in outcomes:
        return EXIT_REFUSED
    if "conflict" in outcomes:
        return EXIT_CONFLICT
    if "deferred" in outcomes:
        return EXIT_DEFERRED
    if outcomes == {"table_gone"} and not all_tables:
        return EXIT_TABLE_GONE
    if outcomes <= {"nothing_to_do", "table_gone"}:  # with --all, tables dropped since discovery
        return EXIT_NOTHING_TO_DO
    if "no_effect" in outcomes:
        return EXIT_NO_EFFECT
    return 0


def _maintain_each(
    engine: Engine, keys: list[TableKey], dry_run: bool, only: list[MaintenanceAction] | None
) -> Iterable[tuple[TableKey, MaintenanceReport]]:
    for index, key in enumerate(keys, start=1):
        name = engine.display_name(key)
        progress(f"[{index}/{len(keys)}] {name}: {'planning' if dry_run else 'maintaining'}")
        # the CLI reports the maintenance alone: the table is not measured again after it
        judged = engine.maintain_and_judge(
            key, dry_run=dry_run, only=only, on_progress=_prefixed_progress(name), remeasure=False
        )
        yield key, judged.report


def _prefixed_progress(name: str) -> Callable[[str], None]:
    return lambda message: progress(f"{name}: {message}")
