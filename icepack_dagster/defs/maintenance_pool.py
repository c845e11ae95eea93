"""The limit of the deployment's maintenance pool, stored in the Dagster instance for that pool alone.

The pool (`PlatformSettings.maintenance_pool`) caps maintenance runs from every launch path; icepack
asks for no instance-wide `pools.default_limit` (it would cap every other team's pools too). A pool
without a stored limit is not limited at all, so the limit must be in the instance before any
maintenance run of the deployment is queued. It is stored, only where the pool has none:
- when the code location loads icepack's definitions (`store_at_load`, called by `IcepackComponent`),
  in the instance `DAGSTER_HOME` configures: the code servers `dagster dev`, `dg dev` and a daemon
  start inherit it, so a component added to a project caps manual runs and backfills before any
  sensor ticks (run and step workers, which reconstruct the loaded definitions, skip it). A process
  with no instance config there (DAGSTER_HOME unset, or a code server pod whose instance is configured
  elsewhere, as in the Helm chart) logs why and stores nothing: opening the instance would make a local
  SQLite one, not the instance that dequeues runs;
- by the start-up step (`python -m icepack_dagster.defs.maintenance_pool` in `scripts/demo`, or
  `dagster instance concurrency set` in the Helm release's hook, docs/OPERATIONS.md), before the daemon;
- by the maintenance sensor at its first tick (`ensure_pool_limit`), wherever neither ran.
The pool is the deployment's own, so a missing limit is never a choice someone made. A stored limit
that differs from the cap (`max_maintenance_in_flight`) is an operator's and is kept; the sensor says so
at each tick, as it then submits more, or fewer, runs than the pool lets run.
"""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg

# Whether Dagster is reconstructing definitions it loaded before (in a run or step worker) or loading
# them (a code server, `dg check defs`): no public API says which.
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import dagster_home, load_settings

logger = logging.getLogger(__name__)


def stored_pool_limit(instance: dg.DagsterInstance, pool: str) -> int | None:
    """The limit stored for `pool`, or None when it has none (its runs are then not limited)."""
    if pool not in instance.event_log_storage.get_concurrency_keys():
        return None
    return instance.event_log_storage.get_concurrency_info(pool).slot_count


def pool_limit_problem(instance: dg.DagsterInstance, platform: PlatformSettings) -> str | None:
    """What is wrong with the pool's stored limit against the sensor's cap, said so that an operator
    knows what to run; None when they agree."""
    pool, cap = platform.maintenance_pool, platform.max_maintenance_in_flight
    stored = stored_pool_limit(instance, pool)
    if stored == cap:
        return None
    fix = (
        f"run `python -m icepack_dagster.defs.maintenance_pool` (or `dagster instance concurrency "
        f"set {pool} {cap}`) where the instance's dagster.yaml is read"
    )
    if stored is None:
        return (
            f"the maintenance pool {pool!r} has no limit in this Dagster instance, so maintenance runs "
            f"launched by hand or by a backfill are not capped at max_maintenance_in_flight ({cap}): {fix}"
        )
    return (
        f"the maintenance pool {pool!r} allows {stored} run(s) at once but max_maintenance_in_flight is "
        f"{cap}: the sensor submits up to {cap} and the pool lets {stored} run; {fix}, or set "
        f"ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT to {stored}"
    )


def set_pool_limit(instance: dg.DagsterInstance, platform: PlatformSettings) -> str:
    """Store the pool's limit as the sensor's cap, for that pool alone; say what changed."""
    pool, cap = platform.maintenance_pool, platform.max_maintenance_in_flight
    before = stored_pool_limit(instance, pool)
    if before == cap:
        return f"maintenance pool {pool!r}: limit {cap} already stored (max_maintenance_in_flight)"
    instance.event_log_storage.set_concurrency_slots(pool, cap)
    was = "no limit" if before is None else f"limit {before}"
    return f"maintenance pool {pool!r}: limit set to {cap} (max_maintenance_in_flight), was {was}"


def ensure_pool_limit(instance: dg.DagsterInstance, platform: PlatformSettings) -> tuple[str, bool] | None:
    """Store the cap as the pool's limit when the pool has none; when one is stored and differs, say
    what is wrong. The message and whether it is a problem (False: the limit was just stored), or None
    when the stored limit is the cap."""
    if stored_pool_limit(instance, platform.maintenance_pool) is None:
        return set_pool_limit(instance, platform), False
    problem = pool_limit_problem(instance, platform)
    return None if problem is None else (problem, True)


def store_at_load(platform: PlatformSettings) -> None:
    """Store the pool's limit, when the pool has none, in the instance this process's DAGSTER_HOME
    configures, or say that a stored one disagrees with the cap; otherwise log why not. Never raises:
    loading the definitions must not depend on it. Not in a run or step worker, which reconstructs the
    definitions a code server loaded (so stored it): opening an instance there would add a few tenths of
    a second to every run process."""
    reconstructing = DefinitionsLoadType.RECONSTRUCTION
    if DefinitionsLoadContext.is_set() and DefinitionsLoadContext.get().load_type is reconstructing:
        return
    pool = platform.maintenance_pool
    later = (
        f"the maintenance pool {pool!r} gets its limit from the maintenance sensor's first tick or from "
        "`python -m icepack_dagster.defs.maintenance_pool`; until then maintenance runs launched by hand "
        "or by a backfill are not capped"
    )
    home = dagster_home()
    if not home:
        logger.warning(f"icepack: no Dagster instance reachable while loading (DAGSTER_HOME unset): {later}")
        return
    if not (Path(home) / "dagster.yaml").is_file():
        logger.warning(
            f"icepack: no Dagster instance config at {Path(home) / 'dagster.yaml'} while loading, so the "
            f"instance that runs this code location is not reachable from here: {later}"
        )
        return
    try:
        with dg.DagsterInstance.get() as instance:
            outcome = ensure_pool_limit(instance, platform)
    except Exception as error:  # each storage plugin raises its own (dagster-postgres: after its retries)
        logger.warning(f"icepack: the Dagster instance of DAGSTER_HOME={home} failed: {error}; {later}")
        return
    if outcome is not None:
        message, problem = outcome
        (logger.warning if problem else logger.info)(f"icepack: {message} (at code location load)")


def main() -> None:
    """`python -m icepack_dagster.defs.maintenance_pool`: store the limit in the instance
    DAGSTER_HOME configures, from icepack's settings (`ICEPACK_*`)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    platform = load_settings().platform
    with dg.DagsterInstance.get() as instance:
        logger.info(set_pool_limit(instance, platform))


if __name__ == "__main__":
    main()
