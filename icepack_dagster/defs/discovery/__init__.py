"""Discovery flow: the sensor that keeps the `iceberg_tables` partitions equal to the catalogs' tables
and asks a first health sync for each new table."""
