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


def arrow_fingerprint(table: Any) -> tuple[int, str]:
    """(row count, order-independent checksum) of a PyIceberg table read through PyIceberg itself
    (deletes applied): an independent reader for tests that cannot share the test's Spark session."""
    import hashlib
    import json

    rows = table.scan().to_arrow().to_pylist()
    digests = sorted(
        hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest() for r in rows
    )
    return len(rows), hashlib.sha256("".join(digests).encode()).hexdigest()
