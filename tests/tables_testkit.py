"""Test helpers over real Spark tables: contents fingerprints (row count + order-independent checksum)
that every maintenance test compares before and after."""

from __future__ import annotations

from typing import Any


def table_fingerprint(spark: Any, qualified: str) -> tuple[int, str]:
    """(row count, checksum of all rows independent of order and file layout)."""
    row = spark.sql(
        f"SELECT count(*) AS n, "
        f"coalesce(sum(xxhash64(to_json(struct(*)))), 0) AS h1, "
        f"coalesce(sum(hash(to_json(struct(*)))), 0) AS h2 FROM {qualified}"
    ).collect()[0]
    return int(row["n"]), f"{row['h1']}:{row['h2']}"
