"""Summaries of manifests already read, so a table is decoded again only where it changed: a bounded
in-memory LRU keyed by (manifest path, small-file threshold), in front of an optional store that keeps
them between processes (every health-sync run is a new process)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

from icepack_dagster.iceberg.manifest_summary import ManifestSummary


class SummaryStore(Protocol):
    """Where summaries outlive the process (`store.manifest_store.ManifestSummaryStore`)."""

    def get_many(self, paths: Sequence[str], small_threshold: int) -> dict[str, ManifestSummary]: ...

    def put_many(self, small_threshold: int, summaries: Mapping[str, ManifestSummary]) -> None: ...


class ManifestCache:
    """Bounded LRU of `ManifestSummary` keyed by (manifest path, small-file threshold), in front of an
    optional `store` that keeps summaries between processes.

    Pass one instance to every `read_status` call that should share it; it is safe across threads.
    `hits` and `misses` count lookups (a hit in memory or in the store; a miss must be decoded), and
    `stored_hits` the hits the store answered, so callers can see how much decoding was saved.
    """

    def __init__(self, max_entries: int = 20_000, store: SummaryStore | None = None) -> None:
        if max_entries < 1:
            raise ValueError(f"ManifestCache max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self.store = store
        self.hits = 0
        self.misses = 0
        self.stored_hits = 0
        self._entries: OrderedDict[tuple[str, int], ManifestSummary] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, small_threshold: int) -> ManifestSummary | None:
        return self.get_many([path], small_threshold)[0]

    def get_many(self, paths: Sequence[str], small_threshold: int) -> list[ManifestSummary | None]:
        """The summary of each path, or None where it must be decoded; one store query for all."""
        with self._lock:
            found = [self._entries.get((path, small_threshold)) for path in paths]
        missing = [path for path, summary in zip(paths, found, strict=True) if summary is None]
        stored = self.store.get_many(missing, small_threshold) if missing and self.store is not None else {}
        found = [summary or stored.get(path) for path, summary in zip(paths, found, strict=True)]
        with self._lock:
            for path, summary in zip(paths, found, strict=True):
                if summary is not None:
                    self._remember(path, small_threshold, summary)
            self.hits += sum(1 for summary in found if summary is not None)
            self.misses += sum(1 for summary in found if summary is None)
            self.stored_hits += len(stored)
        return found

    def put(self, path: str, small_threshold: int, summary: ManifestSummary) -> None:
        self.put_many(small_threshold, {path: summary})

    def put_many(self, small_threshold: int, summaries: Mapping[str, ManifestSummary]) -> None:
        """Keep newly decoded summaries, in memory and in the store (one write for all)."""
        with self._lock:
            for path, summary in summaries.items():
                self._remember(path, small_threshold, summary)
        if self.store is not None and summaries:
            self.store.put_many(small_threshold, summaries)

    def _remember(self, path: str, small_threshold: int, summary: ManifestSummary) -> None:
        self._entries[(path, small_threshold)] = summary
        self._entries.move_to_end((path, small_threshold))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
