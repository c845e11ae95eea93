"""Contract: `icepack.spark.sql.<key>` table properties become `SET spark.sql.<key>=<value>` only for
allowlisted keys with values that validate for their type, re-printed canonically; other `icepack.`
and non-icepack properties are ignored; anything else under `icepack.spark.` is refused with
`RejectedSparkOverrideError` naming the table and the key. No input, however hostile, yields SQL other
than one `SET <allowlisted key>=<validated value>` per override."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icepack_dagster.domain.sql.procedures import SESSION_SETUP
from icepack_dagster.domain.sql.spark_overrides import ALLOWED, render_set, resolve_overrides
from icepack_dagster.exceptions import RejectedSparkOverrideError

TABLE = "lake.sales.orders"


def test_allowlisted_overrides_resolve_to_canonical_values_sorted_by_key() -> None:
    properties = {
        "icepack.spark.sql.shuffle.partitions": "064",
        "icepack.spark.sql.adaptive.enabled": "TRUE",
        "icepack.spark.sql.files.maxPartitionBytes": "128m",
        "icepack.spark.sql.adaptive.advisoryPartitionSizeInBytes": "1GB",
        "icepack.spark.sql.iceberg.planning.preserve-data-grouping": "false",
        "icepack.spark.sql.iceberg.distribution-mode": "Hash",
        "icepack.cadence-hours": "6",  # policy's, not ours
        "write.target-file-size-bytes": "1024",  # Iceberg's, not ours
    }
    assert resolve_overrides(TABLE, properties) == (
        ("spark.sql.adaptive.advisoryPartitionSizeInBytes", "1073741824"),
        ("spark.sql.adaptive.enabled", "true"),
        ("spark.sql.files.maxPartitionBytes", "134217728"),
        ("spark.sql.iceberg.distribution-mode", "hash"),
        ("spark.sql.iceberg.planning.preserve-data-grouping", "false"),
        ("spark.sql.shuffle.partitions", "64"),
    )
    assert resolve_overrides(TABLE, {}) == ()


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("icepack.spark.sql.warehouse.dir", "/tmp", "not an allowlisted"),
        ("icepack.spark.sql.variable.substitute", "true", "not an allowlisted"),
        ("icepack.spark.sql.Shuffle.partitions", "8", "not an allowlisted"),
        ("icepack.spark.executor.memory", "8g", "only icepack.spark.sql"),
        ("icepack.spark.testing", "true", "only icepack.spark.sql"),
        ("icepack.spark.sql.shuffle.partitions", "0", "whole number"),
        ("icepack.spark.sql.shuffle.partitions", "-4", "whole number"),
        ("icepack.spark.sql.shuffle.partitions", "8; DROP TABLE x", "whole number"),
        ("icepack.spark.sql.shuffle.partitions", " 8", "whole number"),
        ("icepack.spark.sql.shuffle.partitions", "٨", "whole number"),
        ("icepack.spark.sql.shuffle.partitions", "1e3", "whole number"),
        ("icepack.spark.sql.adaptive.enabled", "yes", "true or false"),
        ("icepack.spark.sql.adaptive.enabled", "true --", "true or false"),
        ("icepack.spark.sql.files.maxPartitionBytes", "128 m", "byte size"),
        ("icepack.spark.sql.files.maxPartitionBytes", "2tb", "1 TiB"),
        ("icepack.spark.sql.files.maxPartitionBytes", "0", "1 byte"),
        ("icepack.spark.sql.iceberg.distribution-mode", "random", "one of"),
        ("icepack.spark.sql.adaptive.enabled", "x" * 100, "short string"),
    ],
)
def test_anything_else_is_refused_naming_table_and_key(name: str, value: str, reason: str) -> None:
    with pytest.raises(RejectedSparkOverrideError) as caught:
        resolve_overrides(TABLE, {"icepack.spark.sql.adaptive.enabled": "true", name: value})
    assert caught.value.table == TABLE
    assert caught.value.key in (name, "spark.sql." + name.removeprefix("icepack.spark.sql."))
    assert TABLE in str(caught.value) and reason in str(caught.value)


def test_render_set_only_renders_canonical_allowlisted_values() -> None:
    assert render_set("spark.sql.shuffle.partitions", "64") == "SET spark.sql.shuffle.partitions=64"
    with pytest.raises(RejectedSparkOverrideError, match="canonical"):
        render_set("spark.sql.files.maxPartitionBytes", "128m", TABLE)
    with pytest.raises(RejectedSparkOverrideError, match="allowlisted"):
        render_set("spark.sql.warehouse.dir", "/tmp", TABLE)
    with pytest.raises(RejectedSparkOverrideError, match="whole number"):
        render_set("spark.sql.shuffle.partitions", "4 ; RESET", TABLE)


_SET = re.compile(r"SET (" + "|".join(re.escape(k) for k in ALLOWED) + r")=[a-z0-9]+")
_suffixes = st.sampled_from([k.removeprefix("spark.sql.") for k in ALLOWED]) | st.text(max_size=20)
_names = (
    st.builds(lambda s: "icepack.spark.sql." + s, _suffixes)
    | st.builds(lambda s: "icepack.spark." + s, st.text(max_size=10))
    | st.text(max_size=20)
)
_values = (
    st.text(max_size=20)
    | st.integers(-(2**70), 2**70).map(str)
    | st.sampled_from(["true", "False", "128m", "1g", "64", "hash", "8;SET x=1", "4\nRESET"])
    | st.builds(lambda n, u: f"{n}{u}", st.integers(0, 10**16), st.sampled_from(["", "k", "MB", "tb", "x"]))
)


@settings(max_examples=500, deadline=None)
@given(properties=st.dictionaries(_names, _values, max_size=5))
def test_no_input_renders_anything_but_allowlisted_sets(properties: dict[str, str]) -> None:
    try:
        overrides = resolve_overrides(TABLE, properties)
    except RejectedSparkOverrideError as error:
        assert error.table == TABLE and error.reason
        return
    for key, value in overrides:
        statement = render_set(key, value, TABLE)
        assert _SET.fullmatch(statement), statement
        assert "icepack." + key in properties


def test_no_override_can_change_what_a_table_session_is_set_up_with() -> None:
    """A table's session runs `SESSION_SETUP` once, when it opens, and the runner does not send it
    again before each action: that holds only while no table may override one of its settings."""
    setup_keys = {statement.removeprefix("SET ").split("=", 1)[0] for statement in SESSION_SETUP}
    assert setup_keys == {"spark.sql.variable.substitute"}
    assert not setup_keys & set(ALLOWED)
    with pytest.raises(RejectedSparkOverrideError, match="spark.sql.variable.substitute"):
        resolve_overrides(TABLE, {"icepack.spark.sql.variable.substitute": "true"})
