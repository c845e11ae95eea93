"""Spark SQL as icepack renders it: procedure calls, per-table session settings, and the SQL as shown."""
