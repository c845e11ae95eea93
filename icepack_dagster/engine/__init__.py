"""The engine: what icepack can do to any table, composed from the domain and the adapters, with no
Dagster import. `table_engine.py` holds the `Engine` (finding, measuring, judging, recommending);
`maintenance_run.py` one maintenance of one table (lease, plan, Spark, record)."""

from icepack_dagster.engine.maintenance_run import TABLE_GONE
from icepack_dagster.engine.table_engine import Engine

__all__ = ["TABLE_GONE", "Engine"]
