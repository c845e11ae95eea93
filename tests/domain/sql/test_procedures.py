"""Contract: `render_call` produces exactly one Iceberg procedure `CALL` per action. The table argument
unescapes, under Spark's string-literal and multipart-identifier rules, to exactly the table's parts
(whatever characters they hold) and nothing in a name or an option escapes its literal; only
allowlisted options with validated values are rendered, anything else is refused naming the table and
the option; the safety guards refuse destructive actions on gc.enabled=false tables and orphan removal
under 24 hours."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.sql.procedures import (
    guard_action,
    render_call,
    sql_string,
)
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import (
    InvalidPolicyError,
    InvalidProcedureOptionError,
    InvalidTableIdentifierError,
    UnsafeMaintenanceError,
)

KEY = TableKey(catalog="lake", namespace=("sales",), name="orders")
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
A = MaintenanceAction


def read_string_literal(text: str, start: int) -> tuple[str, int]:
    """Spark's lexer and unescaper for a '...' literal starting at `start`: (value, index after it)."""
    assert text[start] == "'"
    out, i = [], start + 1
    simple = {"b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "0": "\0"}
    while text[i] != "'":
        if text[i] == "\\":
            i += 1
            out.append(simple.get(text[i], text[i]))
        else:
            out.append(text[i])
        i += 1
    return "".join(out), i + 1


def parse_multipart(text: str) -> list[str]:
    """Spark's multipart identifier parser, for fully backtick-quoted parts."""
    parts, i = [], 0
    while i < len(text):
        assert text[i] == "`", f"unquoted identifier text at {i}: {text!r}"
        part, i = [], i + 1
        while True:
            if text[i] == "`" and i + 1 < len(text) and text[i + 1] == "`":
                part.append("`")
                i += 2
            elif text[i] == "`":
                i += 1
                break
            else:
                part.append(text[i])
                i += 1
        parts.append("".join(part))
        if i < len(text):
            assert text[i] == ".", f"expected a dot at {i}: {text!r}"
            i += 1
    return parts


def table_argument(statement: str) -> tuple[list[str], str]:
    """The parts the `table` argument addresses, and the statement text after the literal."""
    prefix = "table => "
    start = statement.index(prefix) + len(prefix)
    value, end = read_string_literal(statement, start)
    return parse_multipart(value), statement[end:]


def test_every_action_renders_its_procedure() -> None:
    options = {"min-input-files": "5", "target-file-size-bytes": "1024"}
    assert render_call("lake", KEY, A.REWRITE_DATA_FILES, options) == (
        "CALL lake.system.rewrite_data_files(table => '`lake`.`sales`.`orders`', "
        "options => map('min-input-files', '5', 'target-file-size-bytes', '1024'))"
    )
    assert render_call("lake", KEY, A.REWRITE_DATA_FILES, {"strategy": "binpack"}) == (
        "CALL lake.system.rewrite_data_files(table => '`lake`.`sales`.`orders`', strategy => 'binpack')"
    )
    assert render_call("lake", KEY, A.REWRITE_POSITION_DELETE_FILES, {"rewrite-all": "TRUE"}) == (
        "CALL lake.system.rewrite_position_delete_files(table => '`lake`.`sales`.`orders`', "
        "options => map('rewrite-all', 'true'))"
    )
    assert render_call("lake", KEY, A.REWRITE_MANIFESTS, {}) == (
        "CALL lake.system.rewrite_manifests(table => '`lake`.`sales`.`orders`')"
    )
    assert render_call(
        "lake", KEY, A.EXPIRE_SNAPSHOTS, {"retain_last": "5", "older_than": "2025-05-27T12:00:00+00:00"}
    ) == (
        "CALL lake.system.expire_snapshots(table => '`lake`.`sales`.`orders`', "
        "older_than => TIMESTAMP '2025-05-27 12:00:00.000000+00:00', retain_last => 5)"
    )
    assert render_call(
        "lake", KEY, A.REMOVE_ORPHAN_FILES, {"older_than": "2025-05-29T12:00:00Z", "dry_run": "true"}
    ) == (
        "CALL lake.system.remove_orphan_files(table => '`lake`.`sales`.`orders`', "
        "older_than => TIMESTAMP '2025-05-29 12:00:00.000000+00:00', dry_run => true)"
    )


def test_values_are_reprinted_from_their_type() -> None:
    options = {"min-input-files": "0007", "delete-ratio-threshold": "0.50"}
    call = render_call("lake", KEY, A.REWRITE_DATA_FILES, options)
    assert "'min-input-files', '7'" in call
    assert "'delete-ratio-threshold', '0.5'" in call
    naive = render_call("lake", KEY, A.EXPIRE_SNAPSHOTS, {"older_than": "2025-05-27T12:00:00"})
    shifted = render_call("lake", KEY, A.EXPIRE_SNAPSHOTS, {"older_than": "2025-05-27T14:00:00+02:00"})
    assert naive == shifted  # no offset means UTC; an offset is converted to UTC


@pytest.mark.parametrize(
    ("action", "option", "value", "reason"),
    [
        (A.REWRITE_DATA_FILES, "where", "id > 5\n", "one non-empty line"),
        (A.REWRITE_DATA_FILES, "where", " ", "one non-empty line"),
        (A.EXPIRE_SNAPSHOTS, "where", "id > 5", "not an option"),
        (A.REWRITE_DATA_FILES, "sort_order", "id", "not an option"),
        (A.REWRITE_DATA_FILES, "min-input-files", "-1", "whole number"),
        (A.REWRITE_DATA_FILES, "min-input-files", "5; DROP TABLE x", "whole number"),
        (A.REWRITE_DATA_FILES, "min-input-files", "٥", "whole number"),
        (A.REWRITE_DATA_FILES, "target-file-size-bytes", "99999999999999999999", "whole number"),
        (A.REWRITE_DATA_FILES, "rewrite-all", "yes", "true or false"),
        (A.REWRITE_DATA_FILES, "strategy", "zorder", "one of"),
        (A.REWRITE_DATA_FILES, "delete-ratio-threshold", "1.5", "at most 1"),
        (A.REWRITE_MANIFESTS, "min-input-files", "5", "not an option"),
        (A.EXPIRE_SNAPSHOTS, "retain_last", "0", "whole number"),
        (A.EXPIRE_SNAPSHOTS, "older_than", "last tuesday", "ISO 8601"),
        (A.EXPIRE_SNAPSHOTS, "older_than", "2025-05-27'); DROP TABLE x; --", "ISO 8601"),
        (A.EXPIRE_SNAPSHOTS, "snapshot_ids", "1,2", "not an option"),
        (A.REMOVE_ORPHAN_FILES, "location", "/tmp", "not an option"),
        (A.REMOVE_ORPHAN_FILES, "table", "other.t", "refused"),
    ],
)
def test_bad_options_are_refused_naming_table_and_option(
    action: MaintenanceAction, option: str, value: str, reason: str
) -> None:
    with pytest.raises(InvalidProcedureOptionError) as caught:
        render_call("lake", KEY, action, {option: value})
    message = str(caught.value)
    assert "lake.sales.orders" in message and repr(option) in message and reason in message
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, InvalidPolicyError)
    assert (caught.value.table, caught.value.field) == ("lake.sales.orders", option)


@pytest.mark.parametrize("catalog", ["", "la ke", "lake;", "lake.system", "1lake", "lakë", "`lake`"])
def test_catalog_names_outside_letters_digits_underscore_are_refused(catalog: str) -> None:
    with pytest.raises(InvalidTableIdentifierError, match="letters, digits"):
        render_call(catalog, KEY, A.REWRITE_MANIFESTS, {})


def test_a_namespace_named_like_a_catalog_is_still_qualified() -> None:
    key = TableKey(catalog="lake", namespace=("lake",), name="t")
    assert table_argument(render_call("lake", key, A.REWRITE_MANIFESTS, {}))[0] == ["lake", "lake", "t"]


HOSTILE = [
    "t.'`;é✓ x", "a\\'b", "`", "''", "\\", "x'); DROP TABLE y; --", "${spark.app.name}", "\n\t", "名前.表"
]
parts = st.text(min_size=1, max_size=12) | st.sampled_from(HOSTILE)


@settings(max_examples=300, deadline=None)
@given(namespace=st.lists(parts, min_size=1, max_size=3), name=parts)
def test_any_identifier_is_addressed_exactly_and_cannot_break_out(namespace: list[str], name: str) -> None:
    key = TableKey(catalog="lake", namespace=tuple(namespace), name=name)
    statement = render_call("lake", key, A.REWRITE_DATA_FILES, {"min-input-files": "2"})
    assert statement.startswith("CALL lake.system.rewrite_data_files(table => '")
    addressed, rest = table_argument(statement)
    assert addressed == ["lake", *namespace, name]
    assert rest == ", options => map('min-input-files', '2'))"


def test_sql_string_round_trips_through_the_unescaper() -> None:
    for value in HOSTILE:
        assert read_string_literal(sql_string(value), 0) == (value, len(sql_string(value)))


# A string literal as sql_string renders it: any one-line text, quotes and backslashes escaped (a
# rewrite's `where` is free text; everything else is plain words and numbers).
_SAFE_LITERAL = re.compile(r"'(?:[^'\\\n]|\\.)*'")
_ARGUMENT_SYNTAX = re.compile(r"(, [a-z_]+ => (L|TIMESTAMP L|true|false|[0-9]+|map\(L(, L)*\)))*\)")


@settings(max_examples=300, deadline=None)
@given(
    action=st.sampled_from(list(MaintenanceAction)),
    options=st.dictionaries(
        st.sampled_from(sorted({k for a in A for k in definition(a).options}))
        | st.text(max_size=10),
        st.text(max_size=30) | st.integers(-5, 2**64).map(str) | st.sampled_from(["true", "FALSE", "sort"]),
        max_size=4,
    ),
)
def test_fuzzed_options_render_only_validated_values(
    action: MaintenanceAction, options: dict[str, str]
) -> None:
    try:
        statement = render_call("lake", KEY, action, options)
    except InvalidProcedureOptionError as error:
        assert error.table == "lake.sales.orders" and error.field in options
        return
    _, rest = table_argument(statement)
    # after the table literal: argument names, '=>', commas, map(...), numbers and safe quoted values only
    outside_literals = _SAFE_LITERAL.sub("L", rest)
    assert _ARGUMENT_SYNTAX.fullmatch(outside_literals), rest


def test_destructive_actions_are_refused_when_gc_is_disabled() -> None:
    for value in ("false", "FALSE", "no"):  # Iceberg: anything but "true" disables garbage collection
        for action in (A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES):
            with pytest.raises(UnsafeMaintenanceError, match=r"lake\.sales\.orders.*gc\.enabled"):
                guard_action(KEY, action, {}, {"gc.enabled": value}, NOW)
    guard_action(KEY, A.REWRITE_DATA_FILES, {}, {"gc.enabled": "false"}, NOW)
    guard_action(KEY, A.EXPIRE_SNAPSHOTS, {}, {"gc.enabled": "true"}, NOW)


@pytest.mark.parametrize(
    ("age", "refused"),
    [(timedelta(0), True), (timedelta(hours=23, minutes=59), True), (timedelta(hours=24), False),
     (timedelta(days=3), False), (-timedelta(days=1), True)],
)
def test_orphan_removal_below_24_hours_is_refused(age: timedelta, refused: bool) -> None:
    options = {"older_than": (NOW - age).isoformat()}
    if refused:
        with pytest.raises(UnsafeMaintenanceError, match=r"lake\.sales\.orders.*24 hours"):
            guard_action(KEY, A.REMOVE_ORPHAN_FILES, options, {}, NOW)
    else:
        guard_action(KEY, A.REMOVE_ORPHAN_FILES, options, {}, NOW)
    guard_action(KEY, A.EXPIRE_SNAPSHOTS, options, {}, NOW)  # expiry has no age floor of its own


def test_orphan_guard_reads_timestamps_like_the_renderer() -> None:
    with pytest.raises(InvalidProcedureOptionError, match="older_than"):
        guard_action(KEY, A.REMOVE_ORPHAN_FILES, {"older_than": "yesterday"}, {}, NOW)
    naive_now = NOW.replace(tzinfo=None)
    guard_action(KEY, A.REMOVE_ORPHAN_FILES, {"older_than": "2025-05-29T12:00:00"}, {}, naive_now)
