"""The Dagster layer, one folder per flow (discovery, health_sync, maintenance, fleet) and beside them
the pieces they share: partitions, resources, asset keys, run tags, materialization reads and the
materialization codec. Every module here imports Dagster; bodies are thin: they ask a resource for the
engine, call it, and return a result with metadata."""
