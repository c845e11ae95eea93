"""Dagster wiring: partitions, resources, assets, sensors, schedule, jobs, metadata and run tags. Thin:
every body asks a resource for the engine, calls it, and returns a result with metadata."""
