"""Which tables changed, learnt without loading them: one module per catalog kind that lists every
table's current metadata file (a SQL catalog's `iceberg_tables`, Glue's `GetTables`). A health sync
compares the listing with the metadata files its statuses came from and loads only the changed tables.
REST catalogs list no metadata files; their tables are loaded one by one (`CatalogSet.metadata_locations`
says None for them)."""
