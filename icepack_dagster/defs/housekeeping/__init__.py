"""Housekeeping flow: a daily job that keeps the platform's own databases from growing forever: it
deletes finished Dagster runs (with their event logs) past `run_retention_days` and prunes icepack's
maintenance history past `history_retention_days`."""
