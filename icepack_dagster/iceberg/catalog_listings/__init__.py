"""Which tables changed, learnt without loading them: one module per catalog kind that lists every
table's current metadata file (a SQL catalog's `iceberg_tables`, Glue's `GetTables`). A health sync
compares the listing with the metadata files its statuses came from and loads only the changed tables.
REST catalogs list no metadata files (`CatalogSet.metadata_locations` says None for them): each table is
asked with a conditional loadTable, answered 304 while unchanged where the server sends ETags
(`rest_conditional_loads.py`), else loaded."""
