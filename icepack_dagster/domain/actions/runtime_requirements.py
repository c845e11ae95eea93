"""The runtime-versus-format gate: the refusal when the Spark that would run an action has an Iceberg
runtime older than the action, one of its options or the table's format version needs (or one icepack
cannot tell).

icepack's own sessions load the runtime it pins, but a Spark Connect server, a standalone cluster or a
Kubernetes image brings its own. An old runtime can harm a table it does not fully understand: Apache
Amoro found that Iceberg 1.8.1 could drop `next-row-id` from v3 tables and make them unreadable by 1.9+
(apache/amoro#4376), and options added later are rejected or ignored. So before any action the runner
asks the session for its runtime (`spark/iceberg_runtime.py`) and refuses what it cannot do safely;
the refusal is an outcome of its own (`refused`: not a failure of the table, a person must act).

What each action and option needs is declared by its own module (`min_runtime` of the action's
definition and of each `ProcedureOption`, as found in the runtime jars on Maven Central); what a table
needs is here: any action on a format v3 table needs 1.10.0 (row lineage carried through rewrites,
deletion vectors written and position delete files converted into them; the runtime icepack tests v3
tables with). An option that changes only how an action works (`left_out_below_runtime`: orphan
removal's `stream_results`) never refuses it: a runtime without it, or one that cannot be told, runs
the action without the option (`left_out_options`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from icepack_dagster.domain.actions.definition import IcebergVersion
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition

V3_MINIMUM: IcebergVersion = (1, 10, 0)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> IcebergVersion | None:
    """`1.10.2`, `1.11.0-SNAPSHOT` or `1.9` as numbers; None when the text holds no version."""
    found = _VERSION.match(text.strip()) if text else None
    if found is None:
        return None
    return int(found[1]), int(found[2]), int(found[3] or 0)


def shown(version: IcebergVersion) -> str:
    return ".".join(str(part) for part in version)


def _needs(
    action: MaintenanceAction, option_names: Iterable[str], format_version: int | None
) -> list[tuple[IcebergVersion, str]]:
    """Each minimum that applies, with what needs it."""
    spec = definition(action)
    needs: list[tuple[IcebergVersion, str]] = []
    if spec.min_runtime is not None:
        needs.append((spec.min_runtime, f"the procedure {action}"))
    if format_version is not None and format_version >= 3:
        needs.append((V3_MINIMUM, f"a format v{format_version} table (row lineage, deletion vectors)"))
    for name in option_names:
        option = spec.options.get(name)
        if option is not None and option.min_runtime is not None and not option.left_out_below_runtime:
            needs.append((option.min_runtime, f"option {name}"))
    return needs


def runtime_refusal(
    table: str,
    action: MaintenanceAction,
    option_names: Iterable[str],
    format_version: int | None,
    runtime: str | None,
) -> str | None:
    """Why this runtime must not run `action` with these options on a table of `format_version`, naming
    the table, the runtime and the minimum; None when it may."""
    needs = _needs(action, option_names, format_version)
    if not needs:
        return None
    minimum, what = max(needs)
    version = parse_version(runtime)
    if version is None:
        return (
            f"table {table}: {action} refused: the Iceberg runtime of this Spark cannot be told "
            f"({runtime or 'no answer'}), and {what} needs Iceberg {shown(minimum)} or later; run it on a "
            "Spark whose Iceberg runtime answers org.apache.iceberg.IcebergBuild.version()"
        )
    if version >= minimum:
        return None
    return (
        f"table {table}: {action} refused: this Spark runs Iceberg {runtime}, and {what} needs Iceberg "
        f"{shown(minimum)} or later; upgrade the Spark's Iceberg runtime (icepack pins "
        "iceberg-spark-runtime-3.5_2.12, `icepack jars fetch`) or run maintenance on icepack's own Spark"
    )


def left_out_options(action: MaintenanceAction, option_names: Iterable[str], runtime: str | None) -> set[str]:
    """The options among `option_names` that only change how `action` works and that this runtime
    lacks, or may lack since it cannot be told: they are left out of the CALL."""
    version = parse_version(runtime)
    left_out = set()
    for name in option_names:
        option = definition(action).options.get(name)
        if option is None or not option.left_out_below_runtime or option.min_runtime is None:
            continue
        if version is None or version < option.min_runtime:
            left_out.add(name)
    return left_out
