"""Policy contract: defaults, then matching policy-file rules in file order, then `icepack.*` table
properties, each later layer overriding per field (per action for `actions`), with the layer recorded
for `--explain`. Any invalid or unknown `icepack.*` value raises InvalidPolicyError naming table and
property, and nothing else: fuzzed input never crashes otherwise. The orphan age never goes below 24 h
from any layer. Windows are UTC days + hours and wrap past midnight. The policy file fails at load
naming the rule and field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from icepack_dagster.config.policy_file import load_policy_rules
from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.policy.layering import (
    PROPERTY_NAMES,
    Policy,
    PolicyRule,
    explain_policy,
    in_window,
    resolve_policy,
)
from icepack_dagster.domain.policy.window import MaintenanceWindow, parse_windows
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import ConfigurationError, InvalidPolicyError

KEY = TableKey(catalog="lake", namespace=("analytics",), name="events")
OTHER = TableKey(catalog="lake", namespace=("finance",), name="ledger")
MONDAY = datetime(2025, 3, 10, tzinfo=UTC)  # a Monday, 00:00 UTC


def rule(**values: object) -> PolicyRule:
    return PolicyRule.model_validate(values)


# --- layering --------------------------------------------------------------------------------------


def test_defaults_are_the_documented_safe_values() -> None:
    effective = resolve_policy(KEY, {}, ())
    policy = effective.policy
    assert policy == Policy()
    assert (policy.enabled, policy.cadence_hours, policy.target_file_size_bytes, policy.min_input_files) == (
        True, 24, None, 5
    )
    assert (policy.snapshot_max_age_hours, policy.snapshot_retain_last, policy.orphan_older_than_hours) == (
        120, 5, 72
    )
    assert policy.actions == {action: True for action in ACTION_ORDER}
    assert (policy.quarantine_after_failures, policy.windows, policy.priority_boost) == (3, (), 1.0)
    assert set(effective.sources.values()) == {"default"}


def test_matching_rules_apply_in_file_order_and_properties_win() -> None:
    rules = (
        rule(match="analytics.*", cadence_hours=6, min_input_files=10),
        rule(match="finance.*", cadence_hours=1),
        rule(
            match=["nothing.*", "lake.analytics.ev*"],
            cadence_hours=12,
            actions={"remove_orphan_files": False},
        ),
    )
    properties = {"icepack.min-input-files": "20", "write.format.default": "parquet"}
    effective = resolve_policy(KEY, properties, rules)
    assert effective.policy.cadence_hours == 12
    assert effective.sources["cadence_hours"] == "policy-file rule 3 (lake.analytics.ev*)"
    assert effective.policy.min_input_files == 20
    assert effective.sources["min_input_files"] == "table property icepack.min-input-files"
    assert effective.policy.actions[MaintenanceAction.REMOVE_ORPHAN_FILES] is False
    assert effective.sources["actions.remove_orphan_files"] == "policy-file rule 3 (lake.analytics.ev*)"
    assert effective.sources["snapshot_retain_last"] == "default"

    other = resolve_policy(OTHER, {}, rules)
    assert other.policy.cadence_hours == 1
    assert other.sources["cadence_hours"] == "policy-file rule 2 (finance.*)"
    assert other.policy.actions[MaintenanceAction.REMOVE_ORPHAN_FILES] is True


def test_actions_merge_per_action_across_layers() -> None:
    rules = (rule(match="*", actions={"rewrite_manifests": False, "expire_snapshots": False}),)
    properties = {"icepack.action.expire_snapshots.enabled": "TRUE"}
    effective = resolve_policy(KEY, properties, rules)
    assert effective.policy.actions[MaintenanceAction.REWRITE_MANIFESTS] is False
    assert effective.policy.actions[MaintenanceAction.EXPIRE_SNAPSHOTS] is True
    expire_source = effective.sources["actions.expire_snapshots"]
    assert expire_source == "table property icepack.action.expire_snapshots.enabled"
    assert effective.sources["actions"] == "per action, see actions.<action>"


def test_every_property_sets_its_field() -> None:
    properties = {
        "icepack.enabled": "false",
        "icepack.cadence-hours": "6.5",
        "icepack.target-file-size-bytes": "134217728",
        "icepack.min-input-files": "2",
        "icepack.snapshot.max-age-hours": "0.01",
        "icepack.snapshot.retain-last": "1",
        "icepack.orphan.older-than-hours": "24",
        "icepack.window": "sat,sun; mon-fri 22-06",
        "icepack.quarantine-after-failures": "10",
        "icepack.priority-boost": "2.5",
        "icepack.compaction.hot-minutes": "15",
        "icepack.compaction.delete-ratio-threshold": "0.5",
        "icepack.snapshot.clean-expired-metadata": "true",
        "icepack.compaction.max-files-per-run": "40",
        "icepack.stats.table.commits-behind": "20",
        "icepack.stats.table.rows-changed": "0.1",
        "icepack.stats.partition.commits-behind": "5",
        "icepack.stats.partition.rows-changed": "0.05",
        **{f"icepack.action.{action}.enabled": "false" for action in ACTION_ORDER},
    }
    assert set(properties) == set(PROPERTY_NAMES)
    effective = resolve_policy(KEY, properties, ())
    assert effective.policy == Policy(
        enabled=False, cadence_hours=6.5, target_file_size_bytes=134217728, min_input_files=2,
        snapshot_max_age_hours=0.01, snapshot_retain_last=1, orphan_older_than_hours=24,
        windows=parse_windows("sat,sun 00-24; mon-fri 22-06"), quarantine_after_failures=10,
        priority_boost=2.5, hot_partition_minutes=15, delete_ratio_threshold=0.5, clean_expired_metadata=True,
        max_files_per_run=40, table_stats_commits_behind=20, table_stats_rows_changed=0.1,
        partition_stats_commits_behind=5, partition_stats_rows_changed=0.05,
        actions={action: False for action in ACTION_ORDER},
    )
    set_by = {field: source for field, source in effective.sources.items() if field != "actions"}
    assert all(source.startswith("table property icepack.") for source in set_by.values())


def test_properties_other_components_own_are_ignored_here() -> None:
    properties = {
        "icepack.spark.sql.shuffle.partitions": "not validated here",
        "icepack.small-file-threshold-bytes": "1048576",
        "gc.enabled": "false",
    }
    assert resolve_policy(KEY, properties, ()).policy == Policy()


def test_explain_lists_every_field_with_its_value_and_layer() -> None:
    rules = (rule(match="analytics.*", windows=["sat,sun 00-24"], snapshot_retain_last=10),)
    properties = {"icepack.cadence-hours": "6", "icepack.action.rewrite_manifests.enabled": "false"}
    effective = resolve_policy(KEY, properties, rules)
    rows = {name: (value, source) for name, value, source in explain_policy(effective)}
    assert rows["cadence_hours"] == ("6", "table property icepack.cadence-hours")
    assert rows["windows"] == ("sat,sun 00-24", "policy-file rule 1 (analytics.*)")
    assert rows["snapshot_retain_last"] == ("10", "policy-file rule 1 (analytics.*)")
    manifests_source = "table property icepack.action.rewrite_manifests.enabled"
    assert rows["actions.rewrite_manifests"] == ("false", manifests_source)
    assert rows["actions.rewrite_data_files"] == ("true", "default")
    assert rows["target_file_size_bytes"][0].startswith("table default")
    assert rows["enabled"] == ("true", "default")
    fields = {name for name in Policy.model_fields if name != "actions"}
    expected = fields | {f"actions.{a}" for a in ACTION_ORDER}
    assert set(rows) == expected
    assert explain_policy(resolve_policy(KEY, {}, ()))[-2][1] == "any time"  # windows


def test_policy_survives_a_json_round_trip() -> None:
    policy = resolve_policy(KEY, {"icepack.window": "fri 22-06", "icepack.enabled": "false"}, ()).policy
    data = policy.model_dump(mode="json")
    assert data["windows"] == ["fri 22-06"]
    assert data["actions"]["remove_orphan_files"] is True
    assert Policy.model_validate(data) == policy


# --- invalid values -------------------------------------------------------------------------------

INVALID = [
    ("icepack.cadence-hours", "often", "number"),
    ("icepack.cadence-hours", "-1", "greater than or equal to 0"),
    ("icepack.cadence-hours", "nan", "number"),
    ("icepack.cadence-hours", "1e400", "finite"),
    ("icepack.cadence-hours", "100000", "less than or equal"),
    ("icepack.target-file-size-bytes", "128m", "whole number"),
    ("icepack.target-file-size-bytes", "99999999999999999999999", "less than or equal"),
    ("icepack.target-file-size-bytes", "0", "greater than or equal to 1024"),
    ("icepack.min-input-files", "٥", "digits 0-9"),
    ("icepack.min-input-files", "5.0", "whole number"),
    ("icepack.min-input-files", "0", "greater than or equal to 1"),
    ("icepack.min-input-files", "1_000", "whole number"),
    ("icepack.snapshot.retain-last", "１０", "digits 0-9"),
    ("icepack.cadence-hours", "６", "digits 0-9"),
    ("icepack.cadence-hours", "1_0", "digits 0-9"),
    ("icepack.snapshot.max-age-hours", "-0.5", "greater than or equal to 0"),
    ("icepack.snapshot.retain-last", "0", "greater than or equal to 1"),
    ("icepack.snapshot.retain-last", "", "whole number"),
    ("icepack.orphan.older-than-hours", "23.9", "at least 24 hours"),
    ("icepack.orphan.older-than-hours", "0", "at least 24 hours"),
    ("icepack.orphan.older-than-hours", "-100", "at least 24 hours"),
    ("icepack.quarantine-after-failures", "0", "greater than or equal to 1"),
    ("icepack.priority-boost", "-2", "greater than or equal to 0"),
    ("icepack.priority-boost", "inf", "number"),
    ("icepack.enabled", "yes", "true or false"),
    ("icepack.enabled", "", "true or false"),
    ("icepack.action.rewrite_data_files.enabled", "1", "true or false"),
    ("icepack.action.vacuum.enabled", "true", "unknown action 'vacuum'"),
    ("icepack.window", "", "no window given"),
    ("icepack.window", "someday", "not a day of the week"),
    ("icepack.window", "mon 06-06", "window is empty"),
    ("icepack.window", "mon 22-25", "less than or equal to 24"),
    ("icepack.window", "mon 22:30-06", "not an hour range"),
    ("icepack.window", "mon fri 22-06", "not a window"),
    ("icepack.cadence", "6", "unknown icepack property"),
    ("icepack.", "x", "unknown icepack property"),
]


@pytest.mark.parametrize(("key", "value", "reason"), INVALID)
def test_an_invalid_property_names_table_property_and_reason(key: str, value: str, reason: str) -> None:
    with pytest.raises(InvalidPolicyError) as caught:
        resolve_policy(KEY, {key: value}, ())
    error = caught.value
    assert (error.table, error.field, error.value) == ("lake.analytics.events", key, value)
    assert reason in error.reason
    assert "lake.analytics.events" in str(error) and key in str(error)


def test_orphan_age_below_the_iceberg_guard_is_refused_in_every_layer(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="at least 24 hours"):
        Policy(orphan_older_than_hours=23)
    with pytest.raises(ValidationError, match="at least 24 hours"):
        rule(match="*", orphan_older_than_hours=1)
    path = tmp_path / "policy.yaml"
    path.write_text("rules:\n  - match: '*'\n    orphan_older_than_hours: 12\n")
    with pytest.raises(ConfigurationError, match=r"rule 1 .*orphan_older_than_hours.*at least 24 hours"):
        load_policy_rules(path)


_KEYS = st.sampled_from([*PROPERTY_NAMES, "icepack.unknown", "icepack.action.x.enabled", "icepack.window"])
_TEXT = st.one_of(
    st.text(max_size=60),
    st.from_regex(r"[+-]?[0-9]{0,60}(\.[0-9]{0,5})?([eE][+-]?[0-9]{1,4})?", fullmatch=True),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(["true", "FALSE", "sat,sun", "mon-fri 22-06", "sun-sat 0-24;", "١٢٣", "2⁵", "½", "\x00"]),
)


# A first call can take over 200 ms on a loaded 2-core machine; timing is not the contract here.
@settings(deadline=None)
@given(properties=st.dictionaries(_KEYS, _TEXT, max_size=5))
def test_fuzzed_properties_resolve_or_raise_invalid_policy_error_only(properties: dict[str, str]) -> None:
    try:
        effective = resolve_policy(KEY, properties, ())
    except InvalidPolicyError as error:
        assert error.table == "lake.analytics.events" and error.field in properties
        return
    assert effective.policy.orphan_older_than_hours >= 24
    assert Policy.model_validate(effective.policy.model_dump(mode="json")) == effective.policy


# --- windows --------------------------------------------------------------------------------------


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return MONDAY + timedelta(days=day, hours=hour, minutes=minute)


def test_window_forms_parse_to_days_and_hours() -> None:
    def parsed(text: str) -> tuple[tuple[int, ...], int, int]:
        window = MaintenanceWindow.model_validate(text)
        return window.days, window.start_hour, window.end_hour

    assert parsed("sat,sun 00-24") == ((5, 6), 0, 24)
    assert parsed("mon-fri 22-06") == ((0, 1, 2, 3, 4), 22, 6)
    assert parsed("22:00-06:00") == (tuple(range(7)), 22, 6)
    assert parsed("Saturday") == ((5,), 0, 24)
    assert parsed("fri-mon 1-5") == ((0, 4, 5, 6), 1, 5)


def test_a_daytime_window_holds_from_start_to_before_end() -> None:
    policy = Policy(windows=parse_windows("mon-fri 09-17"))
    assert in_window(policy, at(0, 9))
    assert in_window(policy, at(4, 16, 59))
    assert not in_window(policy, at(0, 17))
    assert not in_window(policy, at(0, 8, 59))
    assert not in_window(policy, at(5, 12))  # Saturday


def test_a_night_window_wraps_past_midnight_into_the_next_day() -> None:
    policy = Policy(windows=parse_windows("mon-fri 22-06"))
    assert in_window(policy, at(0, 22))  # Monday night
    assert in_window(policy, at(1, 5, 59))  # Tuesday morning, Monday's night
    assert in_window(policy, at(5, 3))  # Saturday morning, Friday's night
    assert not in_window(policy, at(0, 3))  # Monday morning belongs to Sunday night: not listed
    assert not in_window(policy, at(5, 22))  # Saturday night
    assert not in_window(policy, at(2, 6))
    sunday_night = Policy(windows=parse_windows("sun 23-01"))
    assert in_window(sunday_night, at(7, 0, 30))  # wraps from Sunday into the next Monday


def test_weekends_and_several_windows() -> None:
    policy = Policy(windows=parse_windows("sat,sun; wed 12-13"))
    assert in_window(policy, at(5, 0)) and in_window(policy, at(6, 23, 59))
    assert in_window(policy, at(2, 12, 30))
    assert not in_window(policy, at(4, 12))


def test_no_window_means_any_time_and_times_are_compared_in_utc() -> None:
    assert in_window(Policy(), at(3, 14))
    policy = Policy(windows=parse_windows("mon 22-23"))
    assert in_window(policy, datetime(2025, 3, 10, 22, 30))  # naive: taken as UTC
    berlin = timezone(timedelta(hours=1))
    assert in_window(policy, datetime(2025, 3, 10, 23, 30, tzinfo=berlin))  # 22:30 UTC
    assert not in_window(policy, datetime(2025, 3, 10, 22, 30, tzinfo=berlin))  # 21:30 UTC


@given(
    days=st.sets(st.integers(0, 6), min_size=1),
    hours=st.tuples(st.integers(0, 23), st.integers(1, 24)).filter(lambda h: h[0] != h[1]),
)
def test_window_text_parses_back_to_the_same_window(days: set[int], hours: tuple[int, int]) -> None:
    window = MaintenanceWindow(days=tuple(days), start_hour=hours[0], end_hour=hours[1])
    assert MaintenanceWindow.model_validate(window.text) == window


# --- the policy file ------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_policy_file_rules_load_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, """
rules:
  - match: "analytics.*"
    cadence_hours: 6
    actions: {remove_orphan_files: false}
    windows: ["sat,sun 00-24"]
  - match: ["lake.finance.*", "ops.*"]
    enabled: false
    target_file_size_bytes: 268435456
""")
    first, second = load_policy_rules(path)
    assert first.match == ("analytics.*",) and first.cadence_hours == 6
    assert first.actions == {MaintenanceAction.REMOVE_ORPHAN_FILES: False}
    assert first.windows == (MaintenanceWindow(days=(5, 6), start_hour=0, end_hour=24),)
    assert second.match == ("lake.finance.*", "ops.*") and second.enabled is False
    assert resolve_policy(OTHER, {}, (first, second)).policy.target_file_size_bytes == 268435456


def test_no_policy_file_and_an_empty_one_mean_no_rules(tmp_path: Path) -> None:
    assert load_policy_rules(None) == ()
    assert load_policy_rules(write(tmp_path, "")) == ()
    assert load_policy_rules(write(tmp_path, "rules: []\n")) == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules:\n  - match: '*'\n  - match: 'a.*'\n    cadence_hours: soon\n",
            r"rule 2 \(match 'a\.\*'\): field cadence_hours",
        ),
        ("rules:\n  - {match: '*', cadence: 6}\n", r"rule 1 .*field cadence: Extra inputs"),
        ("rules:\n  - {cadence_hours: 6}\n", r"rule 1: field match: Field required"),
        ("rules:\n  - {match: [], cadence_hours: 6}\n", r"rule 1: field match: .*at least 1 item"),
        ("rules:\n  - {match: '*', actions: {vacuum: false}}\n", r"field actions\.vacuum"),
        ("rules:\n  - {match: '*', windows: ['mon 25-02']}\n", r"field windows\.0"),
        ("rules:\n  - {match: '*', min_input_files: 2.5}\n", r"field min_input_files"),
        ("rules:\n  - {match: '*', enabled: 'maybe'}\n", r"field enabled"),
        ("rules:\n  - just a string\n", r"rule 1 must be a mapping"),
        ("rules: {match: '*'}\n", r"'rules' must be a list"),
        ("policies: []\n", r"one key, 'rules'"),
        ("rules: [\n", r"not valid YAML"),
    ],
)
def test_an_invalid_policy_file_fails_at_load_naming_rule_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_policy_rules(write(tmp_path, text))


_YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner, max_size=3),
    max_leaves=6,
)
_RULE_KEYS = st.sampled_from([*PolicyRule.model_fields, "cadence", "actions"]) | st.text(max_size=10)


_FUZZ_RULES = st.dictionaries(_RULE_KEYS, _YAML_VALUES, max_size=4)
_MATCHED_RULES = st.builds(
    lambda rest, match: {**rest, "match": match}, _FUZZ_RULES, st.sampled_from(["*", "analytics.*"])
)


@given(rules=st.lists(_FUZZ_RULES | _MATCHED_RULES, max_size=3))
def test_fuzzed_policy_files_load_or_fail_with_configuration_error_only(
    tmp_path_factory: pytest.TempPathFactory, rules: list[dict[str, object]]
) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzzed-policy.yaml"
    path.write_text(yaml.safe_dump({"rules": rules}), encoding="utf-8")
    try:
        loaded = load_policy_rules(path)
    except ConfigurationError as error:
        assert str(path) in str(error)
        return
    assert len(loaded) == len(rules)
    for candidate in (KEY, OTHER):
        assert resolve_policy(candidate, {}, loaded).policy.orphan_older_than_hours >= 24


def test_an_unreadable_policy_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_policy_rules(tmp_path / "missing.yaml")
