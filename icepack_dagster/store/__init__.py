"""Durable control-plane state that is not in Iceberg: maintenance history and quarantine."""
