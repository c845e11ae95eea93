"""Maintenance flow: the `maintenance` job and its assets (`maintenance_recommendation`,
`maintained_table`), the sensors that launch it, record its crashes and re-measure after it, the
one-maintenance-per-table guard and the quarantine release job."""
