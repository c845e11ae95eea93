"""Contract: which Iceberg runtime an action needs on a table, and the refusal that names the table, the
runtime and the minimum: format v3 tables need 1.10.0, as do the options 1.8.1 lacks; a runtime that
cannot be told is refused only where a minimum applies. An option that changes only how an action works
(orphan removal's `stream_results`, 1.11.0) never refuses it: it is left out where the runtime lacks it
or cannot be told."""

from __future__ import annotations

import pytest

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction as A
from icepack_dagster.domain.actions.runtime_requirements import (
    left_out_options,
    parse_version,
    runtime_refusal,
)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("1.10.2", (1, 10, 2)), ("1.11.0-SNAPSHOT", (1, 11, 0)), ("1.9", (1, 9, 0)), ("unknown", None),
        (None, None),
    ],
)
def test_versions_are_read_from_what_iceberg_build_says(
    text: str | None, version: tuple[int, ...] | None
) -> None:
    assert parse_version(text) == version


def test_format_v3_needs_1_10_and_v2_needs_nothing() -> None:
    assert runtime_refusal("lake.ns.t", A.REWRITE_DATA_FILES, {}, 2, "1.8.1") is None
    assert runtime_refusal("lake.ns.t", A.REWRITE_DATA_FILES, {}, 3, "1.10.0") is None
    refusal = runtime_refusal("lake.ns.t", A.REWRITE_MANIFESTS, {}, 3, "1.9.2")
    assert refusal is not None and refusal.startswith(
        "table lake.ns.t: rewrite_manifests refused: this Spark runs Iceberg 1.9.2, and a format v3 table "
        "(row lineage, deletion vectors) needs Iceberg 1.10.0 or later"
    )


@pytest.mark.parametrize(
    ("action", "option"),
    [
        (A.EXPIRE_SNAPSHOTS, "clean_expired_metadata"),
        (A.REMOVE_ORPHAN_FILES, "prefix_listing"),
        (A.REWRITE_DATA_FILES, "max-files-to-rewrite"),
    ],
)
def test_options_newer_than_the_runtime_are_refused(action: A, option: str) -> None:
    refusal = runtime_refusal("lake.ns.t", action, {option: "true"}, 2, "1.8.1")
    assert refusal is not None and f"option {option} needs Iceberg 1.10.0 or later" in refusal
    assert runtime_refusal("lake.ns.t", action, {option: "true"}, 2, "1.10.2") is None


def test_a_runtime_that_cannot_be_told_is_refused_only_where_a_minimum_applies() -> None:
    assert runtime_refusal("lake.ns.t", A.REWRITE_DATA_FILES, {}, 2, None) is None
    refusal = runtime_refusal("lake.ns.t", A.REWRITE_DATA_FILES, {}, 3, None)
    assert refusal is not None and "the Iceberg runtime of this Spark cannot be told (no answer)" in refusal


@pytest.mark.parametrize(
    ("runtime", "left_out"),
    [("1.11.0", set()), ("1.12.1", set()), ("1.10.2", {"stream_results"}), ("1.8.1", {"stream_results"}),
     (None, {"stream_results"})],
)
def test_an_option_that_changes_only_how_is_left_out_on_an_older_runtime_never_refused(
    runtime: str | None, left_out: set[str]
) -> None:
    options = {"older_than": "2020-01-01T00:00:00Z", "stream_results": "true"}
    assert runtime_refusal("lake.ns.t", A.REMOVE_ORPHAN_FILES, options, 2, runtime) is None
    assert left_out_options(A.REMOVE_ORPHAN_FILES, options, runtime) == left_out
    assert left_out_options(A.EXPIRE_SNAPSHOTS, {"stream_results": "true"}, runtime) == set()  # any runtime
