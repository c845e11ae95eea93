"""Maintenance actions: their names and order, the options each procedure may be given, and the planners
that predict what Iceberg's rewrites will do."""
