"""Contract: the table-key text form (also the Dagster partition key) round-trips for every key,
including names with dots, percent signs, commas, control characters and unicode; people can type
'ns.table' or 'catalog.ns.table'."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icepack_dagster.domain.table.key import TableKey, parse_table_key, resolve_table_argument
from icepack_dagster.exceptions import InvalidTableIdentifierError

part = st.text(min_size=1, max_size=20)


@given(catalog=part, namespace=st.lists(part, min_size=1, max_size=3), name=part)
def test_text_form_round_trips(catalog: str, namespace: list[str], name: str) -> None:
    key = TableKey(catalog=catalog, namespace=tuple(namespace), name=name)
    assert parse_table_key(key.text) == key
    assert "," not in key.text and "\n" not in key.text


def test_plain_names_read_naturally() -> None:
    key = TableKey(catalog="lake", namespace=("sales", "eu"), name="orders")
    assert key.text == "lake.sales.eu.orders"
    assert key.dotted == "sales.eu.orders"
    assert key.display(with_catalog=True) == "lake.sales.eu.orders"
    assert key.display(with_catalog=False) == "sales.eu.orders"


def test_dotted_name_is_escaped() -> None:
    key = TableKey(catalog="lake", namespace=("a.b",), name="t")
    assert key.text == "lake.a%2Eb.t"


@pytest.mark.parametrize("bad", ["", "lake", "lake.t", "lake..t", ".a.b"])
def test_malformed_keys_are_refused(bad: str) -> None:
    with pytest.raises(InvalidTableIdentifierError, match="not a table key"):
        parse_table_key(bad)


def test_people_may_omit_the_catalog() -> None:
    assert resolve_table_argument("demo.t", ["lake", "pg"], "lake") == TableKey(
        catalog="lake", namespace=("demo",), name="t"
    )
    assert resolve_table_argument("pg.demo.t", ["lake", "pg"], "lake").catalog == "pg"
    # a first part that is not a catalog is a namespace level
    assert resolve_table_argument("a.b.t", ["lake"], "lake").namespace == ("a", "b")
    with pytest.raises(InvalidTableIdentifierError, match="namespace.table"):
        resolve_table_argument("justatable", ["lake"], "lake")


names = st.lists(st.sampled_from(["lake", "pg", "h"]), min_size=1, max_size=2, unique=True)


@given(catalogs=names, namespace=st.lists(part, min_size=1, max_size=3), name=part, data=st.data())
def test_cli_name_reads_back_as_exactly_that_table(
    catalogs: list[str], namespace: list[str], name: str, data: st.DataObject
) -> None:
    catalog = data.draw(st.sampled_from(catalogs))
    key = TableKey(catalog=catalog, namespace=tuple(namespace), name=name)
    printed = key.cli_name(catalogs)
    assert resolve_table_argument(printed, catalogs, catalogs[0]) == key
    if len(catalogs) > 1:
        assert printed == key.text  # the partition key names the catalog too


def test_dotted_nested_and_substitution_names_are_told_apart() -> None:
    nested = TableKey(catalog="lake", namespace=("h", "weird"), name="t")
    dotted = TableKey(catalog="lake", namespace=("h",), name="weird.t")
    assert nested.cli_name(["lake"]) == "h.weird.t"
    assert dotted.cli_name(["lake"]) == "h.weird%2Et"
    tagged = TableKey(catalog="lake", namespace=("refs",), name="Tagged.Table-v2")
    assert tagged.cli_name(["lake"]) == "refs.Tagged%2ETable-v2"
    substituted = TableKey(catalog="lake", namespace=("s",), name="${x}")
    assert substituted.cli_name(["lake"]) == "s.${x}"
    # a first namespace level named like a catalog keeps the catalog prefix, so it is not read as one
    shadow = TableKey(catalog="lake", namespace=("lake", "x"), name="t")
    assert shadow.cli_name(["lake"]) == "lake.lake.x.t"
    assert resolve_table_argument("lake.lake.x.t", ["lake"], "lake") == shadow


def test_partition_keys_of_simple_names_are_unchanged() -> None:
    assert TableKey(catalog="lake", namespace=("demo",), name="events_small_files").text == (
        "lake.demo.events_small_files"
    )


@pytest.mark.parametrize("bad", ["ns.50%", "ns.a%2", "ns.%zz", "ns.%C3%28"])
def test_a_stray_or_broken_escape_is_refused(bad: str) -> None:
    with pytest.raises(InvalidTableIdentifierError, match="is not a table name"):
        resolve_table_argument(bad, ["lake"], "lake")
    with pytest.raises(InvalidTableIdentifierError, match="is not a table name"):
        parse_table_key("lake." + bad)
