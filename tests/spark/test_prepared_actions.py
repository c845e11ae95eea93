"""Contract: the CALL the runner sends follows the session's Iceberg runtime. An option that changes
only how an action works (orphan removal's `stream_results`, first in Iceberg 1.11.0) is rendered for a
runtime that has it and left out, never refused, for one that lacks it or cannot be told; the rest of
the CALL (older_than above all) is unchanged. Pure: no Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.spark.prepared_actions import prepare_actions, runtime_gate
from tests.factories import make_action

KEY = TableKey(catalog="lake", namespace=("sales",), name="orders")
NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLDER_THAN = (NOW - timedelta(days=3)).isoformat()


@pytest.mark.parametrize(
    ("runtime", "streamed"),
    [("1.11.0", True), ("1.12.0-SNAPSHOT", True), ("1.10.2", False), ("1.8.1", False), (None, False)],
)
def test_stream_results_is_sent_only_to_a_runtime_that_has_it(runtime: str | None, streamed: bool) -> None:
    action = make_action(MaintenanceAction.REMOVE_ORPHAN_FILES, older_than=OLDER_THAN, stream_results="true")
    [prepared] = prepare_actions("lake", KEY, [action], {}, NOW)

    gated = runtime_gate("lake", KEY, prepared, runtime, 2)

    assert gated.runtime_refusal is None and gated.error is None
    assert gated.statements[-1] == (
        "CALL lake.system.remove_orphan_files(table => '`lake`.`sales`.`orders`', older_than => TIMESTAMP "
        f"'2026-05-29 00:00:00.000000+00:00'{', stream_results => true' if streamed else ''})"
    )
    assert gated.statements[:-1] == prepared.statements[:-1]
    assert ("stream_results" in gated.options) is streamed
