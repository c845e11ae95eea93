"""Housekeeping flow: a daily job that keeps icepack's own state from growing forever: it prunes
icepack's maintenance history past `history_retention_days` and, only when `delete_old_runs` is on,
deletes this deployment's own finished Dagster runs (with their event logs) past `run_retention_days`."""
