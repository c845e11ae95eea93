"""Health-sync flow: the `health_sync` job and its schedule, the `table_status`/`table_health` assets,
and the batch sync both run."""
