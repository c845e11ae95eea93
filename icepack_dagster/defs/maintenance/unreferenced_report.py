"""What orphan removal left behind, on the `maintained_table` materialization.

Orphan removal deletes only unreferenced files older than the table's orphan age; younger ones (a
write in progress, or one that was interrupted) stay and are invisible in the table's metadata. So
after a maintenance whose orphan removal ran, the table's location is listed once more against every
file its metadata references (`Engine.unreferenced_files`, the same listing `icepack unreferenced`
prints) and the files still there are reported as numbers the UI can plot: kept because too young, and
old enough for removal yet still present (an orphan removal that collected less than it should have).
The listing reads every manifest and lists the location, as orphan removal itself does, so it runs
only when orphan removal ran. A failed listing is reported, never fails the run.
"""

import dagster as dg

from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import IcepackError

UNREFERENCED_KEPT_FILES = "unreferenced_kept_files"
UNREFERENCED_KEPT_BYTES = "unreferenced_kept_bytes"
UNREFERENCED_REMOVABLE_FILES = "unreferenced_removable_files"
UNREFERENCED_REMOVABLE_BYTES = "unreferenced_removable_bytes"
UNREFERENCED_SUMMARY = "unreferenced_files"


def orphan_removal_ran(report: MaintenanceReport) -> bool:
    return any(
        definition(result.action).deletes_unreferenced_files and result.status in ("succeeded", "no_effect")
        for result in report.results
    )


def unreferenced_metadata(
    engine: Engine, key: TableKey, report: MaintenanceReport
) -> dict[str, dg.MetadataValue]:
    """The unreferenced files left under the table's location after its orphan removal; nothing when
    orphan removal did not run."""
    if not orphan_removal_ran(report):
        return {}
    try:
        found = engine.unreferenced_files(key)
    except IcepackError as error:
        return {UNREFERENCED_SUMMARY: dg.MetadataValue.text(f"unreferenced files not listed: {error}")}
    return {
        UNREFERENCED_KEPT_FILES: dg.MetadataValue.int(len(found.young)),
        UNREFERENCED_KEPT_BYTES: dg.MetadataValue.int(found.young_bytes),
        UNREFERENCED_REMOVABLE_FILES: dg.MetadataValue.int(len(found.removable)),
        UNREFERENCED_REMOVABLE_BYTES: dg.MetadataValue.int(found.removable_bytes),
        UNREFERENCED_SUMMARY: dg.MetadataValue.text(found.summary()),
    }
