"""The slow-tier markers stay honest: a test that starts a tier's process without carrying its marker
fails, naming the marker (so `-m "not daemon and not jvm_servers"` never runs one by accident), and a
test that carries it may start it. The first case runs through the suite's own hook: this test has
no marker."""

from __future__ import annotations

import pytest

from tests import tiers


def test_a_test_without_the_marker_may_not_start_its_tier() -> None:
    with pytest.raises(AssertionError, match=r"without the `daemon` marker: add `pytest.mark.daemon`"):
        tiers.require("daemon", "a dagster-daemon")
    with pytest.raises(AssertionError, match=r"`jvm_servers`"):
        tiers.require("jvm_servers", "Iceberg's REST catalog server")


def test_a_test_with_the_marker_may_start_its_tier() -> None:
    tiers.entering(frozenset({"jvm_servers"}))  # what the hook records for a test marked jvm_servers
    try:
        tiers.require("jvm_servers", "Iceberg's REST catalog server")
    finally:
        tiers.entering(frozenset())
