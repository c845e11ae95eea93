"""The `icepack` command: the engine without Dagster, for people (tables of text) and machines (--json).

Exit codes: 0 done (or a dry run listed its work), 1 failed, 2 bad usage or configuration (an
ill-formed table name too), 3 nothing to do, 4 the named table is gone (not in its catalog: dropped,
or misspelt; nothing ran), 5 deferred (the catalog or storage kept failing transiently after retries,
or another maintenance holds the table; nothing ran; try again later), 6 no effect (an action ran but
did nothing where its prediction planned work). Table names are printed in the
form that reads back as exactly that table (domain/table/key.py).
Progress goes to stderr so that --json output stays clean on stdout.
"""

from __future__ import annotations

import sys

import click

from icepack_dagster.cli.context import EXIT_FAILED, EXIT_USAGE
from icepack_dagster.cli.maintain_command import maintain
from icepack_dagster.cli.operator_commands import OPERATOR_COMMANDS
from icepack_dagster.cli.spark_commands import SPARK_COMMANDS
from icepack_dagster.cli.table_commands import TABLE_COMMANDS
from icepack_dagster.exceptions import (
    ConfigurationError,
    IcepackError,
    InvalidTableIdentifierError,
    MissingComponentError,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """icepack: measure, judge and maintain Apache Iceberg tables (no Dagster needed)."""


for _command in (*TABLE_COMMANDS, maintain, *OPERATOR_COMMANDS, *SPARK_COMMANDS):
    cli.add_command(_command)


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
