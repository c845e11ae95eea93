"""Which metadata file is current for each table of a SQL catalog, read from the catalog's own table
with SQLAlchemy alone.

PyIceberg's SqlCatalog and Iceberg's JdbcCatalog keep one row per table in `iceberg_tables` (catalog
name, namespace, table name, metadata location: the JDBC catalog's schema, which both share). A health
sync learns from these rows which tables changed since their last status; a steady sync reads no table
at all, so for a SQL catalog it needs nothing else from the catalog. Reading the rows here rather than
through PyIceberg's catalog spares such a run importing PyIceberg and opening its catalog: about 0.3 s
of CPU in every health-sync run process (docs/PERFORMANCE.md, section 5).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Column, MetaData, String, Table, create_engine, inspect, select, tuple_
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from icepack_dagster.exceptions import CatalogUnavailableError

_CHUNK = 500

SQL_CATALOG_TABLES = Table(
    "iceberg_tables",
    MetaData(),
    Column("catalog_name", String(255), primary_key=True),
    Column("table_namespace", String(255), primary_key=True),
    Column("table_name", String(255), primary_key=True),
    Column("metadata_location", String(1000)),
)


def listing_engine(uri: str) -> SqlEngine:
    """An engine on the catalog's database for listing only: its connection is closed after each listing
    (NullPool), so a process that lists once per run keeps no idle connection to the catalog."""
    return create_engine(uri, poolclass=NullPool)


def metadata_locations(
    engine: SqlEngine, catalog_name: str, identifiers: Sequence[tuple[str, ...]]
) -> dict[tuple[str, ...], str]:
    """The current metadata file of each of `identifiers` (identifier -> location), in one query per 500
    tables. A table missing from the result does not exist; so does
    every table of a catalog database without `iceberg_tables` (no catalog was ever opened on it:
    PyIceberg creates the table then)."""
    columns = SQL_CATALOG_TABLES.c
    query = select(columns.table_namespace, columns.table_name, columns.metadata_location)
    query = query.where(columns.catalog_name == catalog_name)
    pair = tuple_(columns.table_namespace, columns.table_name)
    wanted = [(".".join(identifier[:-1]), identifier[-1]) for identifier in identifiers]
    queries = [query.where(pair.in_(wanted[i : i + _CHUNK])) for i in range(0, len(wanted), _CHUNK)]
    try:
        with engine.connect() as connection:
            rows = [row for chunk in queries for row in connection.execute(chunk).all()]
    except SQLAlchemyError as error:
        if _lacks_table_list(engine):
            return {}
        raise CatalogUnavailableError(
            f"catalog {catalog_name!r}: its table list could not be read ({type(error).__name__}: {error})"
        ) from error
    return {
        (*namespace.split("."), name): location for namespace, name, location in rows if location is not None
    }


def _lacks_table_list(engine: SqlEngine) -> bool:
    """Whether the database answers and has no `iceberg_tables` (asked only after a listing failed)."""
    try:
        return not inspect(engine).has_table(SQL_CATALOG_TABLES.name)
    except SQLAlchemyError:
        return False
