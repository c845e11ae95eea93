"""The sensors' pure decisions: which Dagster partitions discovery adds and removes, which tables the
maintenance sensor launches and how they share runs, and the sensors' typed cursors."""
