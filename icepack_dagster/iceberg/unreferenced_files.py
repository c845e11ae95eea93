"""Which files under a table's location its metadata does not reference.

Referenced means reachable from the table's current metadata the way Iceberg's orphan removal sees it:
the metadata file and the previous ones in its log, every snapshot's manifest list, manifests and the
data and delete files they list as live, and statistics and partition-statistics files. Everything
else under the location is unreferenced; `domain/table/unreferenced_files.py` splits it by the orphan
age; `missing_referenced_files` is the other way round (what a check after orphan removal reads). Manifest
lists and manifests are read with the project's Avro readers (`manifest_reader.py`), the
location is listed with PyArrow.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.unreferenced_files import (
    UnreferencedFile,
    UnreferencedFiles,
    classify_unreferenced,
    orphan_removal_conflicts,
    removable_before,
    removed_since,
    split_location,
)
from icepack_dagster.exceptions import MetadataReadError
from icepack_dagster.iceberg.catalog_errors import METADATA_READ_ERRORS
from icepack_dagster.iceberg.manifest_reader import ManifestRef, live_file_paths, read_manifest_list

if TYPE_CHECKING:
    from pyarrow import fs as pafs
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table


def referenced_locations(table: Table) -> set[str]:
    """Every file location the table's metadata reaches, across all snapshots, branches and tags."""
    metadata = table.metadata
    found = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    found |= {stats.statistics_path for stats in metadata.statistics}
    found |= {stats.statistics_path for stats in metadata.partition_statistics}
    manifests: dict[str, ManifestRef] = {}  # snapshots share most manifests: each is read once
    for snapshot in metadata.snapshots:
        found.add(snapshot.manifest_list)
        manifests.update((ref.path, ref) for ref in read_manifest_list(table.io, snapshot.manifest_list))
    for path, ref in manifests.items():
        found.add(path)
        if ref.live_files != 0:  # a manifest of deleted entries only lists no live file (unknown: read)
            found.update(live_file_paths(table.io, path))
    return found


def list_files(location: str, io: FileIO | None = None) -> list[UnreferencedFile]:
    """Every visible file under `location` with its size and modification time: local paths and
    file://, other URIs through the table's PyArrow FileIO (so with the catalog's S3 endpoint and
    credentials), or any filesystem pyarrow opens from a URI with ambient credentials."""
    # Imported here: pyarrow and pandas cost every process that imports the engine about a second of
    # start-up (each health-sync run is a process), and only orphan checks list files.
    from pyarrow import fs as pafs
    from pyiceberg.io.pyarrow import PyArrowFileIO

    scheme, netloc, path = split_location(location)
    if scheme in ("", "file"):
        filesystem: pafs.FileSystem = pafs.LocalFileSystem()
        root, prefix = path, ""
    elif isinstance(io, PyArrowFileIO):
        filesystem = io.fs_by_scheme(scheme, netloc)
        root, prefix = f"{netloc}{path}".rstrip("/"), f"{scheme}://"
    else:
        filesystem, root = pafs.FileSystem.from_uri(location)
        prefix = f"{scheme}://"
    infos = filesystem.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return [
        UnreferencedFile(
            location=prefix + info.path,
            size_bytes=info.size or 0,
            modified_at=(info.mtime or datetime.fromtimestamp(0, UTC)).astimezone(UTC),
        )
        for info in infos
        if info.type == pafs.FileType.File and not _hidden(info.path[len(root) :])
    ]


def _hidden(relative: str) -> bool:
    """Hidden files and directories (Hadoop's `.crc` checksums, `_temporary`), which Iceberg's orphan
    removal never lists either."""
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def _references_and_listing(table: Table, key: TableKey) -> tuple[set[str], list[UnreferencedFile]]:
    try:
        return referenced_locations(table), list_files(table.location(), table.io)
    except METADATA_READ_ERRORS as error:
        raise MetadataReadError(
            f"table {key.text}: its files could not be listed or its manifests read "
            f"({type(error).__name__}: {error})"
        ) from error


def find_unreferenced_files(
    table: Table, key: TableKey, orphan_age_hours: float, now: datetime
) -> UnreferencedFiles:
    """The table's unreferenced files, split by the orphan age (see `domain/table/unreferenced_files.py`)."""
    referenced, listed = _references_and_listing(table, key)
    return classify_unreferenced(key.text, table.location(), listed, referenced, now, orphan_age_hours)


def orphan_removal_refusals(table: Table, key: TableKey) -> list[str]:
    """Why orphan removal must not run on this table (see `orphan_removal_conflicts`); empty if it may.
    Reads every manifest and lists the location once, as orphan removal itself will."""
    return orphan_removal_check(table, key, None)[0]


def orphan_removal_check(
    table: Table, key: TableKey, older_than: datetime | None
) -> tuple[list[str], frozenset[tuple[str, str, str]]]:
    """`orphan_removal_refusals`, and from the same listing the files orphan removal with `older_than`
    would delete (`removable_before`; none predicted without an `older_than`)."""
    referenced, listed = _references_and_listing(table, key)
    refusals = orphan_removal_conflicts(key.text, table.location(), referenced, listed)
    predicted = removable_before(listed, referenced, older_than) if older_than is not None else frozenset()
    return refusals, predicted


def files_removed_since(table: Table, key: TableKey, predicted: frozenset[tuple[str, str, str]]) -> int:
    """How many of the `predicted` files (from `orphan_removal_check`) a listing now no longer finds."""
    try:
        listed = list_files(table.location(), table.io)
    except METADATA_READ_ERRORS as error:
        raise MetadataReadError(
            f"table {key.text}: its files could not be listed ({type(error).__name__}: {error})"
        ) from error
    return removed_since(predicted, listed)


def missing_referenced_files(table: Table) -> tuple[str, ...]:
    """Files some snapshot, branch or tag references that no longer exist: those under the table's
    location are looked up in one listing, any elsewhere one by one."""
    referenced = referenced_locations(table)
    listed = {_plain(f.location) for f in list_files(table.location(), table.io)}
    missing = [
        path for path in referenced
        if _plain(path) not in listed and not table.io.new_input(path).exists()
    ]
    return tuple(sorted(missing))


def _plain(location: str) -> str:
    """A location without its `file:` scheme spelling (`file:/x`, `file:///x` and `/x` are one file)."""
    if location.startswith("file:"):
        return "/" + location.removeprefix("file:").lstrip("/")
    return location
