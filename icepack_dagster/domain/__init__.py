"""Pure domain logic over frozen pydantic models. Imports no dagster, pyiceberg or pyspark."""
