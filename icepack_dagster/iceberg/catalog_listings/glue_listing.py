"""Which metadata file is current for each table of a Glue catalog, from one paginated `GetTables`
listing per database.

Glue keeps an Iceberg table's current metadata file in the table's `Parameters` (`metadata_location`,
beside `table_type` = `ICEBERG`), and `GetTables` returns many tables a page. A health sync compares
these with the metadata files its statuses came from and loads only the tables that changed, instead
of one `GetTable` and one metadata file read per table. The listing goes through the Glue client of
PyIceberg's own `GlueCatalog` (its public `glue` attribute), so region, endpoint, profile, credentials,
retries and the catalog id registered on the client are exactly those PyIceberg uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from icepack_dagster.exceptions import CatalogUnavailableError
from icepack_dagster.iceberg.catalog_errors import is_transient

ICEBERG_TABLE_TYPE = "ICEBERG"


def glue_metadata_locations(
    glue: Any, catalog_name: str, identifiers: Sequence[tuple[str, ...]]
) -> dict[tuple[str, ...], str]:
    """The current metadata file of each of `identifiers` (identifier -> location), listing each of
    their databases once. A table missing from the result does not exist as an Iceberg table (nor does
    any table of a database that does not exist); a Glue error other than a missing database is
    `CatalogUnavailableError` naming the catalog."""
    databases = sorted({identifier[0] for identifier in identifiers if len(identifier) == 2})
    listed: dict[tuple[str, ...], str] = {}
    for database in databases:
        listed |= _database_locations(glue, catalog_name, database)
    return {identifier: listed[identifier] for identifier in identifiers if identifier in listed}


def _database_locations(glue: Any, catalog_name: str, database: str) -> dict[tuple[str, ...], str]:
    """Every Iceberg table of one Glue database and its metadata file, page by page."""
    found: dict[tuple[str, ...], str] = {}
    try:
        for page in glue.get_paginator("get_tables").paginate(DatabaseName=database):
            for table in page.get("TableList", []):
                parameters = table.get("Parameters") or {}
                location = parameters.get("metadata_location")
                if location and parameters.get("table_type", "").upper() == ICEBERG_TABLE_TYPE:
                    found[(database, table["Name"])] = location
    except glue.exceptions.EntityNotFoundException:
        return {}
    except Exception as error:  # botocore raises per-service and transport errors; translate them here
        raise CatalogUnavailableError(
            f"catalog {catalog_name!r}: the tables of Glue database {database!r} could not be listed "
            f"({type(error).__name__}: {error}); check the catalog's region, endpoint and credentials",
            transient=is_transient(error),
        ) from error
    return found
