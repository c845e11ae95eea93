"""What every `icepack` command shares: the exit codes, the engine built once per invocation from the
settings, the `--json` option, and how answers and progress are printed (answers on stdout, progress on
stderr, so that --json output stays clean)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from icepack_dagster.config.settings import load_settings
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING_TO_DO, EXIT_TABLE_GONE, EXIT_DEFERRED = 0, 1, 2, 3, 4, 5
EXIT_NO_EFFECT = 6  # an action ran but did nothing where its prediction planned work
EXIT_CONFLICT = 7  # a concurrent writer's commit made Iceberg refuse an action's commit: nothing committed
EXIT_VIOLATED = 8  # an action's commit broke an invariant: the table is paused until a person releases it
EXIT_REFUSED = 9  # the Spark's Iceberg runtime cannot run an action safely on the table
ModelT = TypeVar("ModelT", bound=BaseModel)


def progress(message: str) -> None:
    click.echo(f"… {message}", err=True)


def emit(data: Any, as_json: bool, human: Callable[[], str]) -> None:
    click.echo(json.dumps(data, indent=2, default=str) if as_json else human())


def emit_table_result(
    engine: Engine, key: TableKey, result: ModelT, as_json: bool, human: Callable[[str, ModelT], str]
) -> None:
    """A read command's answer about one table: the model as JSON with the table's name, or as text."""
    name = engine.display_name(key)
    emit(result.model_dump(mode="json") | {"table": name}, as_json, lambda: human(name, result))


class CommandContext:
    """The engine, built on first use so that commands which need none (`jars fetch`) stay cheap."""

    def __init__(self) -> None:
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(load_settings())
        return self._engine


pass_ctx = click.make_pass_decorator(CommandContext, ensure=True)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
