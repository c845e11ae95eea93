"""Files under a table's location that no metadata references, split by the orphan age.

A write in progress, or one that was interrupted (a maintenance process killed between writing its
files and committing them, a commit whose outcome never came back), leaves files that no snapshot
references. Orphan removal deletes them only once they are older than the orphan age (never under
Iceberg's 24 hours), so until then they are reported here: bounded, named and sized, instead of
silently accumulating. Pure: the adapter supplies the listing and the referenced locations.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote, urlsplit

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel

_SAME_SCHEME = {"": "file", "s3a": "s3", "s3n": "s3"}  # how Iceberg's orphan removal compares them


class UnreferencedFile(FrozenModel):
    """One file that no snapshot, manifest, statistics file or metadata file references."""

    location: str
    size_bytes: int = Field(ge=0)
    modified_at: datetime


class UnreferencedFiles(FrozenModel):
    """The unreferenced files of one table at one moment."""

    table: str
    location: str = Field(description="The table location that was listed")
    measured_at: datetime
    orphan_age_hours: float = Field(ge=24)
    young: tuple[UnreferencedFile, ...] = Field(
        default=(), description="Newer than the orphan age: a write in progress or an interrupted one; kept"
    )
    removable: tuple[UnreferencedFile, ...] = Field(
        default=(), description="Older than the orphan age: orphan removal deletes them"
    )

    @property
    def young_bytes(self) -> int:
        return sum(f.size_bytes for f in self.young)

    @property
    def removable_bytes(self) -> int:
        return sum(f.size_bytes for f in self.removable)

    def summary(self) -> str:
        """One line for a report or a log."""
        return (
            f"table {self.table}: {len(self.young)} unreferenced files ({self.young_bytes} bytes) newer "
            f"than {self.orphan_age_hours:g} h are kept (writes in progress or interrupted); "
            f"{len(self.removable)} ({self.removable_bytes} bytes) are old enough for orphan removal"
        )


def split_location(location: str) -> tuple[str, str, str]:
    """(scheme, authority, path) of a file location, its path running to the end: Iceberg writes
    locations as a scheme and authority followed by the literal path, never with a query or fragment,
    so a `#` or `?` is part of a directory's name, not the start of a URL fragment or query."""
    parts = urlsplit(location, allow_fragments=False)
    start = len(parts.scheme) + 1 if parts.scheme else 0
    if location[start : start + 2] == "//":
        start += 2 + len(parts.netloc)
    return parts.scheme, parts.netloc, location[start:]


def file_identity(location: str) -> tuple[str, str, str]:
    """(scheme, authority, path) as orphan removal compares them: `/p`, `file:/p` and `file:///p` are
    one file; `s3a://b/k` and `s3://b/k` are one file; another authority is another file."""
    scheme, netloc, path = split_location(location)
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        return "file", "", location
    scheme = _SAME_SCHEME.get(scheme.lower(), scheme.lower())
    return scheme, netloc, unquote(path)


def classify_unreferenced(
    table: str,
    location: str,
    listed: Iterable[UnreferencedFile],
    referenced: Iterable[str],
    now: datetime,
    orphan_age_hours: float,
) -> UnreferencedFiles:
    """The listed files no referenced location names, young or removable by their modification time."""
    known = {file_identity(path) for path in referenced}
    cutoff = now.astimezone(UTC) - timedelta(hours=orphan_age_hours)
    young: list[UnreferencedFile] = []
    removable: list[UnreferencedFile] = []
    for entry in sorted(listed, key=lambda f: f.location):
        if file_identity(entry.location) in known:
            continue
        (removable if entry.modified_at.astimezone(UTC) < cutoff else young).append(entry)
    return UnreferencedFiles(
        table=table,
        location=location,
        measured_at=now,
        orphan_age_hours=orphan_age_hours,
        young=tuple(young),
        removable=tuple(removable),
    )


def removable_before(
    listed: Iterable[UnreferencedFile], referenced: Iterable[str], older_than: datetime
) -> frozenset[tuple[str, str, str]]:
    """The listed files no referenced location names and last modified before `older_than` (as
    `file_identity`): what orphan removal with that `older_than` deletes, as the listing saw it."""
    known = {file_identity(path) for path in referenced}
    cutoff = older_than.astimezone(UTC)
    return frozenset(
        file_identity(entry.location)
        for entry in listed
        if entry.modified_at.astimezone(UTC) < cutoff and file_identity(entry.location) not in known
    )


def removed_since(
    predicted: frozenset[tuple[str, str, str]], listed_after: Iterable[UnreferencedFile]
) -> int:
    """How many of the files `removable_before` found are gone from a listing after orphan removal.
    Exactly the files it deleted: no other action of a maintenance deletes an unreferenced file (expiry
    deletes only files that expired snapshots referenced), and a file it deletes later than the listing
    before it would have to be both old enough and newly unreferenced."""
    present = {file_identity(entry.location) for entry in listed_after}
    return len(predicted - present)


# Object stores have no directories, and Spark's Hadoop listing has no filesystem for them (S3FileIO is
# Iceberg's, not Hadoop's): orphan removal lists their table locations by prefix, through the table's IO.
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs", "oss"})
_SHOWN_CONFLICTS = 3


def on_object_store(location: str) -> bool:
    return urlsplit(location).scheme.lower() in OBJECT_STORE_SCHEMES


def _as_written(location: str) -> tuple[str, str, str]:
    """(scheme, authority, path) exactly as written, but for `/p` and `file:/p` naming one file:
    unlike `file_identity`, `s3a` and `s3` stay apart."""
    scheme, netloc, path = split_location(location)
    return scheme.lower() if len(scheme) > 1 else "file", netloc, unquote(path)


def orphan_removal_conflicts(
    table: str, location: str, referenced: Iterable[str], listed: Iterable[UnreferencedFile]
) -> list[str]:
    """Why orphan removal under `location` cannot tell orphans from files it must keep; empty if it can.

    - The metadata references a file under the location's path through another scheme spelling
      (`s3://` beside an `s3a://` location) or another authority (bucket): a listing sees one name,
      the metadata another; Iceberg's defaults equate some schemes, and icepack does not guess.
    - Another table's metadata file lies under the location: that table's files would be listed as
      unreferenced by this one."""
    scheme, authority, path = _as_written(location)
    root = path.rstrip("/") + "/"
    mismatched = sorted(
        ref
        for ref in referenced
        if _as_written(ref)[2].startswith(root) and _as_written(ref)[:2] != (scheme, authority)
    )
    own_metadata = root + "metadata/"
    nested = sorted(
        f.location
        for f in listed
        if f.location.endswith(".metadata.json")
        and _as_written(f.location)[2].startswith(root)
        and not _as_written(f.location)[2].startswith(own_metadata)
    )
    conflicts = []
    if mismatched:
        conflicts.append(
            f"the metadata references {len(mismatched)} file(s) under {location} by another scheme or "
            f"authority (e.g. {', '.join(mismatched[:_SHOWN_CONFLICTS])})"
        )
    if nested:
        conflicts.append(
            f"another table's metadata lies inside {location} (e.g. {', '.join(nested[:_SHOWN_CONFLICTS])}), "
            "so its files would be listed as unreferenced by this one"
        )
    return [f"table {table}: remove_orphan_files refused, nothing was deleted: {c}" for c in conflicts]
