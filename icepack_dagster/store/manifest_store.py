"""Manifest summaries kept in SQL, so a new process does not decode manifests an earlier one read.

Every health-sync run is a new process (a Kubernetes pod in production), so an in-memory cache dies with
it: a table that changed would have every manifest decoded again, though a commit adds one or two.
Manifests never change once written, so a summary stored under the manifest's path (and the small-file
threshold it was counted with) stays true. Rows older than `max_age_days` are pruned: a manifest still
in use is then decoded once more and stored again.

This is a cache: when its database cannot be read or written, status is measured without it (a warning
is logged), never failed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, MetaData, Table, Text, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.exc import SQLAlchemyError

from icepack_dagster.domain.clock import utc_now
from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.iceberg.manifest_summary import ManifestSummary, PartitionFiles
from icepack_dagster.store.state_database import open_state_database, redacted_url

_log = logging.getLogger(__name__)
_metadata = MetaData()
_CHUNK = 500

SUMMARY_VERSION = 4  # bump when what a summary holds or how it is computed changes: a new table starts
manifest_summaries = Table(
    f"icepack_manifest_summaries_v{SUMMARY_VERSION}",
    _metadata,
    Column("path", Text, primary_key=True),
    Column("small_threshold", BigInteger, primary_key=True),
    Column("summary", Text, nullable=False),
    Column("stored_at", DateTime(timezone=True), nullable=False, index=True),
)


def encode_summary(summary: ManifestSummary) -> str:
    fields = asdict(summary)
    fields["size_histogram"] = list(summary.size_histogram)
    fields["partitions"] = sorted(summary.partitions)
    fields["partition_files"] = [asdict(files) for files in summary.partition_files]
    return json.dumps(fields, separators=(",", ":"))


def _values(values: list[Any]) -> tuple[Any, ...]:
    """Partition values back from JSON: a tagged bytes pair is a tuple again, so values stay hashable."""
    return tuple(tuple(v) if isinstance(v, list) else v for v in values)


def decode_summary(text: str) -> ManifestSummary:
    fields: dict[str, Any] = json.loads(text)
    fields["size_histogram"] = tuple(fields["size_histogram"])
    fields["partitions"] = frozenset(fields["partitions"])
    fields["partition_files"] = tuple(
        PartitionFiles(
            **{**files, "values": _values(files["values"]), "snapshot_ids": tuple(files["snapshot_ids"])}
        )
        for files in fields.get("partition_files", ())
    )
    return ManifestSummary(**fields)


class ManifestSummaryStore:
    """Summaries by (manifest path, small-file threshold) in the state database; thread-safe."""

    def __init__(self, url: str, max_age_days: float = 30.0) -> None:
        self.url = url
        self.max_age = timedelta(days=max_age_days)
        self._engine: SqlEngine | None = None
        self._lock = threading.Lock()
        self._pruned = False

    def _database(self) -> SqlEngine:
        with self._lock:
            if self._engine is None:
                self._engine = open_state_database(self.url)
            return self._engine

    def get_many(self, paths: Sequence[str], small_threshold: int) -> dict[str, ManifestSummary]:
        """The stored summaries of those of `paths` that have one."""
        found: dict[str, ManifestSummary] = {}
        try:
            with self._database().connect() as connection:
                for start in range(0, len(paths), _CHUNK):
                    query = select(manifest_summaries.c.path, manifest_summaries.c.summary).where(
                        manifest_summaries.c.small_threshold == small_threshold,
                        manifest_summaries.c.path.in_(paths[start : start + _CHUNK]),
                    )
                    for path, text in connection.execute(query):
                        found[path] = decode_summary(text)
        except (SQLAlchemyError, ConfigurationError, OSError, ValueError, TypeError, KeyError) as error:
            _log.warning(
                "manifest summaries could not be read from %s, decoding instead: %s",
                redacted_url(self.url), type(error).__name__,
            )
        return found

    def put_many(self, small_threshold: int, summaries: Mapping[str, ManifestSummary]) -> None:
        """Store summaries (a path already stored is left as it is: manifests never change)."""
        if not summaries:
            return
        now = utc_now()
        rows = [
            {"path": path, "small_threshold": small_threshold, "summary": encode_summary(s), "stored_at": now}
            for path, s in summaries.items()
        ]
        try:
            engine = self._database()
            dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
            with engine.begin() as connection:
                statement = dialect.insert(manifest_summaries).on_conflict_do_nothing()
                connection.execute(statement, rows)
                if not self._pruned:
                    self._pruned = True
                    stale = manifest_summaries.c.stored_at < now - self.max_age
                    connection.execute(delete(manifest_summaries).where(stale))
        except (SQLAlchemyError, ConfigurationError, OSError) as error:
            url = redacted_url(self.url)
            _log.warning("manifest summaries could not be stored in %s: %s", url, type(error).__name__)

    def count(self) -> int:
        """How many summaries are stored."""
        with self._database().connect() as connection:
            return int(connection.execute(select(func.count()).select_from(manifest_summaries)).scalar_one())
