"""Contract: hostile input, fuzzed, on real tables, never becomes SQL and never stops other tables.

Table properties with invalid, huge or unicode values (set on the real table through PyIceberg) give
that table a clear error naming it and the property, while the next tables in the loop are maintained
as usual. Identifiers with quotes, backticks, semicolons, dots, spaces, Spark variable references and
unicode address exactly their own table. Override keys and values that try to break out of a `SET`
are refused. Spark is handed a thin recording wrapper around the real session, and every statement it
ever receives is `SET <allowlisted key>=<validated value>`, a `CALL` of the expected shape on the
expected table, the runner's read-only probe of that table (it exists; its format version) or of
the session's Iceberg runtime. (The probe is SQL rather than
`session.table()` because the fuzzer found that `table()` still substitutes `${...}` in the name.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.policy.layering import PROPERTY_NAMES
from icepack_dagster.domain.sql.procedures import (
    qualified_table,
    quote_identifier,
    sql_string,
    table_probe,
)
from icepack_dagster.domain.sql.spark_overrides import ALLOWED, SQL_PROPERTY_PREFIX, validate_override
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.iceberg_runtime import RUNTIME_PROBE
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.store.history_store import HistoryStore
from tests.engine.safety_testkit import RecordingSpark
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

A = MaintenanceAction
_SET = re.compile(r"SET ([A-Za-z0-9.\-]+)=([A-Za-z0-9]+)")
_CALL = re.compile(r"CALL lake\.system\.([a-z_]+)\(table => ('(?:[^'\\]|\\.)*')(, .*)?\)", re.DOTALL)
_PROCEDURES = {a.value for a in A}
FUZZ = settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def assert_only_allowed_sql(executed: list[str], keys: list[TableKey]) -> None:
    """Every statement is the session setup, an allowlisted SET with a canonical value, a CALL of a
    known procedure on one of `keys`, the runner's read-only probe of one of `keys` (it exists; its
    format version), or its read-only probe of the session's Iceberg runtime."""
    literals = {sql_string(quote_identifier("lake", *key.identifier)) for key in keys}
    probes = {table_probe("lake", key) for key in keys} | {RUNTIME_PROBE}
    for statement in executed:
        if statement == "SET spark.sql.variable.substitute=false" or statement in probes:
            continue
        if match := _SET.fullmatch(statement):
            name, value = match.groups()
            assert name in ALLOWED and validate_override("t", name, value) == value, statement
            continue
        call = _CALL.fullmatch(statement)
        assert call is not None and call.group(1) in _PROCEDURES, statement
        assert call.group(2) in literals, statement


def engine_for(
    settings_: IcepackSettings, catalogs: CatalogSet, spark: SparkSession, executed: list[str], tmp_path: Path
) -> Engine:
    recording = RecordingSpark(spark, executed)
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings_, catalogs, spark_provider=lambda: recording, history=history)


def test_bad_properties_fail_their_table_and_the_loop_goes_on(
    spark: SparkSession, catalogs: CatalogSet, settings: IcepackSettings, namespace: str, tmp_path: Path
) -> None:
    hostile = {
        "bad_policy": {"icepack.min-input-files": "\uff15"},  # a fullwidth 5
        "huge_value": {"icepack.cadence-hours": "9" * 100_000},
        "set_breakout": {"icepack.spark.sql.shuffle.partitions": "4; DROP TABLE good"},
        "unknown_setting": {"icepack.spark.sql.warehouse.dir": "/tmp\n; SET spark.testing=true"},
    }
    keys = {
        name: make_table(
            catalogs, table_key(namespace, name), commits=2, properties={"format-version": "2"} | props
        )
        for name, props in hostile.items()
    }
    good = make_table(catalogs, table_key(namespace, "good"), commits=10)
    before = table_fingerprint(spark, qualified_table("lake", good))
    executed: list[str] = []
    engine = engine_for(settings, catalogs, spark, executed, tmp_path)

    reports = [engine.maintain(key) for key in [*keys.values(), good]]  # what `maintain --all` does

    for (name, props), report in zip(hostile.items(), reports, strict=False):
        [prop] = props
        assert report.outcome == "failed", name
        assert all(r.status in ("failed", "skipped") for r in report.results)
        error = report.first_error or ""
        named = prop.removeprefix("icepack.")  # an override is named by its Spark key, spark.sql.<key>
        assert error.startswith(f"table {keys[name].text}") and named in error, error
        assert len(error) < 2000  # a huge value is quoted, not echoed whole
    assert reports[-1].outcome == "succeeded", reports[-1].first_error
    assert table_fingerprint(spark, qualified_table("lake", good)) == before
    assert spark.sql(f"SELECT count(*) FROM {qualified_table('lake', good)}.files").first()[0] == 1
    assert_only_allowed_sql(executed, [*keys.values(), good])


_OVERRIDE_KEYS = st.one_of(
    st.sampled_from(sorted(ALLOWED)).map(lambda k: SQL_PROPERTY_PREFIX + k.removeprefix("spark.sql.")),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30).map(
        lambda suffix: SQL_PROPERTY_PREFIX + suffix
    ),
)
_VALUES = st.one_of(
    st.sampled_from(["4", "true", "128m", "hash", "0", "-1", "1e3", "4; DROP TABLE x", "4\nSET a=b", "'"]),
    st.text(max_size=40),
    st.text(min_size=5000, max_size=6000, alphabet="9"),
)
_POLICY = st.dictionaries(st.sampled_from(PROPERTY_NAMES), _VALUES, max_size=2)
_ICEBERG_KEYS = ("gc.enabled", "commit.manifest.target-size-bytes", "write.target-file-size-bytes")
_ICEBERG = st.dictionaries(st.sampled_from(_ICEBERG_KEYS), _VALUES, max_size=1)


def test_fuzzed_properties_on_a_real_table_are_errors_or_allowlisted_sql(
    spark: SparkSession, catalogs: CatalogSet, settings: IcepackSettings, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "fuzzed"), commits=2)
    table = catalogs.get("lake").load_table(key.identifier)
    executed: list[str] = []
    engine = engine_for(settings, catalogs, spark, executed, tmp_path)
    manifests = make_recommendation(make_action(A.REWRITE_MANIFESTS), table=key.text)
    before = table_fingerprint(spark, qualified_table("lake", key))

    @FUZZ
    @given(overrides=st.dictionaries(_OVERRIDE_KEYS, _VALUES, max_size=2), policy=_POLICY, iceberg=_ICEBERG)
    @example(overrides={"icepack.spark.sql.adaptive.enabled": "TRUE"}, policy={}, iceberg={})
    def check(overrides: dict[str, str], policy: dict[str, str], iceberg: dict[str, str]) -> None:
        properties = overrides | policy | iceberg
        table.refresh()
        with table.transaction() as transaction:
            if stale := [k for k in table.properties if k.startswith("icepack.") or k in _ICEBERG_KEYS]:
                transaction.remove_properties(*stale)
            if properties:
                transaction.set_properties(properties)

        for report in (engine.maintain(key, recommendation=manifests), engine.maintain(key, dry_run=True)):
            for result in report.results:  # every outcome is a result naming the table, never a crash
                seen.add(result.status)
                if result.status == "failed":
                    assert key.text in (result.error or ""), result.error
        assert_only_allowed_sql(executed, [key])

    seen: set[str] = set()
    check()
    assert {"succeeded", "failed", "dry_run"} <= seen  # both paths were exercised
    assert any(_SET.fullmatch(s) and "substitute" not in s for s in executed)  # an override reached Spark
    assert table_fingerprint(spark, qualified_table("lake", key)) == before


_NAME = (
    st.lists(
        st.sampled_from([*"ab'`;.\" -$}{*\\é✓日", "${spark.app.name}", "--", "/*", "%2E"]),
        min_size=1,
        max_size=8,
    )
    .map("".join)
    .filter(lambda name: name.strip(".") and not name.startswith((".", "_")) and "/" not in name)
)


def test_fuzzed_identifiers_address_exactly_their_own_table(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    catalog = catalogs.get("lake")
    decoy = make_table(catalogs, table_key(namespace, "decoy"), commits=3)
    literal = spark.newSession()  # reads here must not substitute ${...} either
    literal.sql("SET spark.sql.variable.substitute=false")
    decoy_before = table_fingerprint(literal, qualified_table("lake", decoy))
    executed: list[str] = []
    runner = MaintenanceRunner(RecordingSpark(spark, executed), "lake")  # type: ignore[arg-type]

    @FUZZ
    @given(name=_NAME)
    def check(name: str) -> None:
        key = TableKey(catalog="lake", namespace=(namespace,), name=name)
        table = catalog.create_table_if_not_exists(key.identifier, schema=pa.schema([("id", pa.int64())]))
        for batch in range(2):
            table.append(pa.table({"id": pa.array([batch, 10 + batch], pa.int64())}))
        before = table_fingerprint(literal, qualified_table("lake", key))
        del executed[:]

        [result] = runner.run(key, [make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})])

        assert result.status == "succeeded", result.error
        addressed = sql_string(quote_identifier("lake", namespace, name))
        assert result.statements[-1].startswith(f"CALL lake.system.rewrite_data_files(table => {addressed},")
        assert_only_allowed_sql(executed, [key])
        assert table_fingerprint(literal, qualified_table("lake", key)) == before
        assert len(catalog.load_table(key.identifier).inspect.files()) == 1

    check()
    assert table_fingerprint(literal, qualified_table("lake", decoy)) == decoy_before
    assert len(catalog.load_table(decoy.identifier).inspect.files()) == 3
