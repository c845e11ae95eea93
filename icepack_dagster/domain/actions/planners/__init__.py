"""The planners that predict, file by file, what Iceberg's procedures will do: compaction's bin-packing,
the position delete rewrite, and what both statistics actions share. Each action stays its own module
one level up and calls these."""
