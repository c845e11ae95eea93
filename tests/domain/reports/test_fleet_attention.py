"""The tables a person should look at first: every unhealthy or quarantined table, critical before
unknown before warning (a quarantined healthy table last), the biggest first within a state; sizes
only for tables measured; healthy tables that are not quarantined never listed. The tables whose
maintenance keeps conflicting with concurrent writers are named apart (they are not failing)."""

from __future__ import annotations

from icepack_dagster.domain.health.model import HealthState, Severity
from icepack_dagster.domain.reports.fleet import FleetSummary, fleet_markdown, needing_attention
from tests.factories import make_health, make_issue

H, W, C, U = HealthState.HEALTHY, HealthState.WARNING, HealthState.CRITICAL, HealthState.UNKNOWN


def test_most_urgent_and_biggest_first() -> None:
    states = {"l.n.fine": H, "l.n.warm": W, "l.n.small_hot": C, "l.n.big_hot": C, "l.n.lost": U,
              "l.n.stuck": H}
    healths = {"l.n.big_hot": make_health(C, make_issue("SMALL_FILES", Severity.CRITICAL, 0.9),
                                          make_issue("SNAPSHOT_BACKLOG", Severity.WARNING, 80))}
    sizes = {"l.n.big_hot": 5 << 30, "l.n.small_hot": 1 << 20, "l.n.warm": 7 << 30, "l.n.fine": 1}
    rows = needing_attention(states, healths, sizes, {"l.n.stuck": "disk full"})
    assert [r.table for r in rows] == ["l.n.big_hot", "l.n.small_hot", "l.n.lost", "l.n.warm", "l.n.stuck"]
    assert rows[0].issues == ("SMALL_FILES", "SNAPSHOT_BACKLOG") and rows[0].data_bytes == 5 << 30
    assert rows[2].data_bytes is None and rows[2].issues == ()
    assert rows[-1].quarantined and rows[-1].last_error == "disk full" and rows[-1].state is H


def test_a_table_its_spark_refused_needs_a_person_even_when_healthy() -> None:
    why = "table l.n.v3: rewrite_data_files refused: this Spark runs Iceberg 1.8.1, and ..."
    rows = needing_attention({"l.n.v3": H, "l.n.fine": H}, {}, {}, {}, {"l.n.v3": why})
    assert [(r.table, r.refused, r.quarantined) for r in rows] == [("l.n.v3", why, False)]
    summary = FleetSummary(generated_at_epoch=1, tables=2, by_state={H: 2}, attention=tuple(rows),
                           attention_total=1)
    assert "**1 refused** by their Spark's Iceberg runtime" in fleet_markdown(summary)


def test_the_markdown_says_how_many_need_attention_and_how_to_release() -> None:
    rows = needing_attention({"l.n.a": C, "l.n.b": W}, {}, {}, {"l.n.a": "boom"})
    summary = FleetSummary(generated_at_epoch=1, tables=2, by_state={C: 1, W: 1}, table_states={},
                           quarantined={"l.n.a": "boom"}, attention=tuple(rows[:1]), attention_total=2,
                           bytes_reclaimed_total=1536)
    text = fleet_markdown(summary)
    assert "**2 table(s) need attention** (the 1 most urgent listed)" in text
    assert "Reclaimed so far: 0 files, 1.5 KiB." in text
    assert "**1 quarantined**: release with `icepack quarantine release TABLE`" in text


def test_the_markdown_names_the_tables_that_keep_conflicting() -> None:
    summary = FleetSummary(generated_at_epoch=1, tables=1, conflicting={"l.n.hot": "3 in a row; last: x"})
    text = fleet_markdown(summary)
    assert "**1 keep conflicting with concurrent writers** (not failures): see `conflicting`" in text
    assert "commit cadence and what would help" in text
    assert "keep conflicting" not in fleet_markdown(FleetSummary(generated_at_epoch=1, tables=1))
