"""The freshness policy of `table_status` and `table_health`: Dagster's native signal that the health
sync stopped (no sensor can report that it stopped itself).

A scheduled sync writes a table only when it changed or its periodic rewrite is due
(domain/health/sync_writes.py), so a quiet fleet writes little; but every table is rewritten at least
once per `1.5 x` its rewrite interval (a table written out of phase waits up to half an interval for its
next moment), at the first tick after its moment, by a run that may take up to a tick's gap. An asset
with no materialization of any table for longer than that has had no sync: it fails its freshness.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import islice, pairwise

import dagster as dg

# The schedule's own tick iterator, so the gap is exactly the one between the ticks Dagster makes; no
# public API exposes it.
from dagster._utils.schedules import cron_string_iterator

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames

_TICKS_LOOKED_AT = 2000
_START = 1_767_225_600.0  # 2026-01-01 UTC: any fixed start will do, a cron repeats within a year


def longest_tick_gap(cron: str) -> timedelta:
    """The longest time between two consecutive ticks of `cron` (UTC) over its next 2,000 ticks."""
    ticks = islice(cron_string_iterator(_START, cron, "UTC"), _TICKS_LOOKED_AT)
    return max(later - earlier for earlier, later in pairwise(ticks))


def health_freshness(platform: PlatformSettings) -> dg.FreshnessPolicy:
    """Fails when no table was written for longer than a running sync ever leaves the assets alone."""
    rewrite = timedelta(hours=1.5 * max(platform.health_rewrite_hours, platform.attention_rewrite_hours))
    gap = longest_tick_gap(platform.health_sync_cron)
    return dg.FreshnessPolicy.time_window(fail_window=rewrite + 2 * gap)


def with_health_freshness(platform: PlatformSettings, spec: dg.AssetSpec) -> dg.AssetSpec:
    """`spec` with the health sync's freshness policy when it is `table_status` or `table_health`."""
    names = DeploymentNames.of(platform)
    if spec.key not in (names.table_status, names.table_health):
        return spec
    return dg.apply_freshness_policy(spec, health_freshness(platform))
