"""The embedded catalog: a SQLite catalog file and a local warehouse directory, under the icepack home
by default. PyIceberg reaches it through SQLAlchemy, Spark through Iceberg's JDBC catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import Field

from icepack_dagster.config.catalogs.base import (
    LITERAL_FILE_IO,
    PY_IO_IMPL,
    CatalogHome,
    CatalogKind,
    file_location,
)

SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"


class EmbeddedCatalogSettings(CatalogKind):
    """A SQLite catalog file and a local warehouse directory, under the icepack home by default."""

    jdbc_driver_jar = SQLITE_JDBC_JAR

    kind: Literal["embedded"] = "embedded"
    path: Path | None = Field(default=None, description="SQLite catalog file; default HOME/catalog.db")
    warehouse: Path | None = Field(default=None, description="Warehouse directory; default HOME/warehouse")

    def pyiceberg_properties(self, home: CatalogHome) -> dict[str, str]:
        db, warehouse = embedded_paths(self, home)
        # timeout: wait for Spark's JDBC writer instead of failing with "database is locked"
        return {
            "type": "sql",
            "uri": f"sqlite:///{_sqlite_url_path(db)}?timeout=30",
            "warehouse": file_location(warehouse),
            PY_IO_IMPL: LITERAL_FILE_IO,  # `#` and `?` in local paths, as Iceberg writes them
        }

    def spark_conf(self, prefix: str, home: CatalogHome) -> dict[str, str]:
        db, warehouse = embedded_paths(self, home)
        return {
            f"{prefix}.type": "jdbc",
            f"{prefix}.uri": f"jdbc:sqlite:{db}",
            f"{prefix}.warehouse": file_location(warehouse),
            f"{prefix}.jdbc.schema-version": "V1",
            # PyIceberg creates the catalog tables; Java's start-up probe leaves SQLite read
            # transactions open (stale reads, "database is locked"), so it is switched off.
            f"{prefix}.jdbc.init-catalog-tables": "false",
        }


def embedded_paths(catalog: EmbeddedCatalogSettings, home: CatalogHome) -> tuple[Path, Path]:
    """(SQLite file, warehouse directory) of an embedded catalog."""
    db = (catalog.path or home.catalog_db_path).expanduser().resolve()
    warehouse = (catalog.warehouse or home.warehouse_path).expanduser().resolve()
    return db, warehouse


def _sqlite_url_path(db: Path) -> str:
    """The SQLite file as SQLAlchemy reads a URL's database part: percent-decoded, so it is encoded here
    (a `%`, `?` or `#` in the path then reaches SQLite unchanged)."""
    return quote(str(db), safe="/")
