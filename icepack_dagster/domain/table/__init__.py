"""A table's facts as Iceberg keeps them: its key, its measured status, its Iceberg properties and file-size
limits, its snapshots and refs, its (Iceberg) partition layout, and the files no metadata references."""
