"""Contract: a table's Iceberg properties are read exactly as Iceberg (Java) reads them, by one parser per
property that policy, recommendation and the runtime guard share: booleans by `Boolean.parseBoolean`,
numbers by `Integer.parseInt`/`Long.parseLong`; an unreadable number is reported, never guessed. The
table's own retention raises icepack's unless the owner chose less with `icepack.snapshot.*`, and the
guard refuses a stale expiry that would keep less."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.policy.layering import PolicyRule, resolve_policy
from icepack_dagster.domain.sql.procedures import guard_action
from icepack_dagster.domain.table.iceberg_properties import (
    ICEBERG_PROPERTIES,
    explain_iceberg_layer,
    gc_enabled,
    iceberg_layer,
    iceberg_value,
    java_integer,
)
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import UnsafeMaintenanceError

KEY = TableKey(catalog="lake", namespace=("ns",), name="t")
NOW = datetime(2025, 3, 14, 12, 0, tzinfo=UTC)
MIN_KEEP, MAX_AGE = "history.expire.min-snapshots-to-keep", "history.expire.max-snapshot-age-ms"


@pytest.mark.parametrize(
    ("text", "enabled"),
    [("true", True), ("TRUE", True), ("tRuE", True), ("false", False), ("no", False), ("1", False),
     ("true ", False), (" true", False), ("", False), ("yes", False)],
)
def test_gc_enabled_is_true_only_as_java_reads_it(text: str, enabled: bool) -> None:
    assert gc_enabled({"gc.enabled": text}) is enabled
    assert gc_enabled({}) is True  # Iceberg's default


@pytest.mark.parametrize(
    ("text", "value"), [("30", 30), ("+7", 7), ("-1", -1), ("３０", 30), ("٣", 3), ("0" * 40 + "9", 9)]
)
def test_numbers_parse_as_java_parses_them(text: str, value: int) -> None:
    assert java_integer(text, "int") == value


@pytest.mark.parametrize("text", ["1_000", " 5", "5 ", "5.0", "", "+", "2147483648", "1e3"])
def test_numbers_java_refuses_are_errors(text: str) -> None:
    with pytest.raises(ValueError, match="Java int"):
        java_integer(text, "int")
    assert iceberg_value({MIN_KEEP: text}, MIN_KEEP).error is not None


def test_long_properties_take_the_java_long_range() -> None:
    assert java_integer(str(2**63 - 1), "long") == 2**63 - 1
    for beyond in (str(2**63), "9" * 5000):
        with pytest.raises(ValueError, match="range"):
            java_integer(beyond, "long")


def test_the_layer_lists_every_property_with_its_source() -> None:
    layer = iceberg_layer({MIN_KEEP: "30", "gc.enabled": "no", MAX_AGE: "soon"})
    assert [v.name for v in layer] == [p.name for p in ICEBERG_PROPERTIES]
    rows = {name: (value, source) for name, value, source in explain_iceberg_layer(layer)}
    assert rows[MIN_KEEP] == ("30", "table property")
    assert rows["gc.enabled"] == ("false", "table property")
    assert rows["commit.manifest.target-size-bytes"] == ("8388608", "Iceberg default")
    assert rows[MAX_AGE][0] == "'soon'" and "unreadable by Iceberg" in rows[MAX_AGE][1]


def test_the_tables_retention_raises_icepacks_unless_the_owner_chose_less() -> None:
    rule = PolicyRule(match=("*",), snapshot_retain_last=2, snapshot_max_age_hours=0)
    raised = resolve_policy(KEY, {MIN_KEEP: "30", MAX_AGE: str(10 * 24 * 3600 * 1000)}, (rule,))
    assert (raised.policy.snapshot_retain_last, raised.policy.snapshot_max_age_hours) == (30, 240.0)
    assert MIN_KEEP in raised.sources["snapshot_retain_last"]
    looser = resolve_policy(KEY, {MIN_KEEP: "1", MAX_AGE: "0"}, ())
    assert (looser.policy.snapshot_retain_last, looser.policy.snapshot_max_age_hours) == (5, 120.0)
    owner = {MIN_KEEP: "30", "icepack.snapshot.retain-last": "3", MAX_AGE: "999999999"}
    chosen = resolve_policy(KEY, owner | {"icepack.snapshot.max-age-hours": "1"}, (rule,))
    assert (chosen.policy.snapshot_retain_last, chosen.policy.snapshot_max_age_hours) == (3, 1.0)
    huge = resolve_policy(KEY, {MIN_KEEP: "2147483647", MAX_AGE: str(2**63 - 1)}, ())
    assert huge.policy.snapshot_retain_last == 2**31 - 1
    unreadable = resolve_policy(KEY, {MIN_KEEP: "thirty"}, ())
    assert unreadable.policy.snapshot_retain_last == 5  # nothing guessed; expiry is skipped instead


def test_the_guard_refuses_an_expiry_keeping_less_than_the_table_does() -> None:
    expire = MaintenanceAction.EXPIRE_SNAPSHOTS
    stale = {"retain_last": "5", "older_than": (NOW - timedelta(hours=120)).isoformat()}
    with pytest.raises(UnsafeMaintenanceError, match=r"lake\.ns\.t.*retain_last 5.*min-snapshots-to-keep=30"):
        guard_action(KEY, expire, stale, {MIN_KEEP: "30"}, NOW)
    with pytest.raises(UnsafeMaintenanceError, match=r"lake\.ns\.t.*max-snapshot-age-ms"):
        guard_action(KEY, expire, stale, {MAX_AGE: str(200 * 3600 * 1000)}, NOW)
    with pytest.raises(UnsafeMaintenanceError, match="cannot be read by Iceberg"):
        guard_action(KEY, expire, stale, {MIN_KEEP: "1_000"}, NOW)
    guard_action(KEY, expire, stale, {MIN_KEEP: "30", "icepack.snapshot.retain-last": "5"}, NOW)
    guard_action(KEY, expire, stale, {MIN_KEEP: "5", MAX_AGE: str(120 * 3600 * 1000)}, NOW)
