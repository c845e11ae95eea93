"""The SQL a person reads: each session setting once, in order; a long CALL with one argument a line,
split only at the commas between its arguments (never inside a quoted string, a backticked name or a
nested map); short statements untouched."""

from __future__ import annotations

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.display import call_lines, readable_sql
from icepack_dagster.domain.sql.procedures import SESSION_SETUP, render_call
from icepack_dagster.domain.table.key import parse_table_key

KEY = parse_table_key("lake.sales.or,ders")


def test_each_setting_once_and_the_statements_in_order() -> None:
    short = render_call("lake", KEY, MaintenanceAction.REWRITE_MANIFESTS, {})
    statements = [*SESSION_SETUP, "CALL a()", *SESSION_SETUP, short, "SET other=1", *SESSION_SETUP]
    assert readable_sql(statements) == [*SESSION_SETUP, "CALL a()", short, "SET other=1"]


def test_a_long_call_is_one_argument_a_line() -> None:
    where = "region IN ('eu, west', 'it\\'s)') AND day > '2025-01-01'"
    call = render_call("lake", KEY, MaintenanceAction.REWRITE_DATA_FILES,
                       {"where": where, "min-input-files": "5", "target-file-size-bytes": "134217728"})
    lines = call_lines(call).splitlines()
    assert lines[0] == "CALL lake.system.rewrite_data_files(" and lines[-1] == ")"
    assert lines[1] == "  table => '`lake`.`sales`.`or,ders`',"
    assert lines[2].startswith("  where => 'region IN (") and lines[2].endswith(",")
    assert lines[3] == "  options => map('min-input-files', '5', 'target-file-size-bytes', '134217728')"
    joined = lines[0] + " ".join(line.strip() for line in lines[1:-1]) + ")"
    assert joined == call  # only whitespace was added
