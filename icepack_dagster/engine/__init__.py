"""The engine: what icepack can do to any table, composed from the domain and the adapters, with no
Dagster import. `table_engine.py` holds the `Engine` (finding, measuring, judging, recommending);
`maintenance_run.py` one maintenance of one table (lease, plan, Spark, record), through the narrow
`MaintenanceServices` the engine provides; `Engine.maintain_and_judge` maintains, then re-measures and
judges the table, for the CLI, the one-table asset and the batch op alike."""

from icepack_dagster.engine.maintenance_run import TABLE_GONE, JudgedMaintenance
from icepack_dagster.engine.table_engine import Engine

__all__ = ["TABLE_GONE", "Engine", "JudgedMaintenance"]
