"""PyIceberg catalogs built from settings, with errors translated into what to do next.

PyIceberg is imported when a catalog is first opened, not with this module: a steady health sync of SQL
catalogs learns every table's metadata file from the catalog's own table (`catalog_listings/sql_listing.py`),
reads no table, and so never needs PyIceberg, whose import is a tenth of such a run's CPU.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.engine import Engine as SqlEngine

from icepack_dagster.config.catalogs import (
    CatalogSettings,
    EmbeddedCatalogSettings,
    embedded_paths,
    pyiceberg_properties,
)
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import (
    CatalogUnavailableError,
    ConfigurationError,
    InternalError,
    MetadataReadError,
    TableNotFoundError,
)
from icepack_dagster.iceberg.catalog_errors import (
    RETRY_DELAYS_SECONDS,
    is_programming_error,
    is_transient,
    with_retries,
)
from icepack_dagster.iceberg.catalog_listings.glue_listing import glue_metadata_locations
from icepack_dagster.iceberg.catalog_listings.rest_conditional_loads import (
    ConditionalLoad,
    ConditionalLoads,
    rest_catalog_of,
)
from icepack_dagster.iceberg.catalog_listings.sql_listing import listing_engine, metadata_locations

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

logger = logging.getLogger(__name__)
Loaded = TypeVar("Loaded")


def prepare_embedded_catalog(catalog: EmbeddedCatalogSettings, settings: IcepackSettings) -> None:
    """Create the home directories and put the SQLite file in WAL mode, so Spark's JDBC catalog and
    PyIceberg can read and write it at the same time."""
    db, warehouse = embedded_paths(catalog, settings)
    db.parent.mkdir(parents=True, exist_ok=True)
    warehouse.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(db)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def catalog_settings(name: str, settings: IcepackSettings) -> CatalogSettings:
    """The settings of the catalog called `name`, or a `ConfigurationError` naming the configured ones."""
    try:
        return settings.catalogs[name]
    except KeyError:
        raise ConfigurationError(
            f"no catalog named {name!r}; configured catalogs: {sorted(settings.catalogs)}"
        ) from None


def open_catalog(name: str, settings: IcepackSettings) -> Catalog:
    """The PyIceberg catalog called `name`; creates an embedded catalog's files on first use."""
    from pyiceberg.catalog import load_catalog

    catalog = catalog_settings(name, settings)
    if isinstance(catalog, EmbeddedCatalogSettings):
        prepare_embedded_catalog(catalog, settings)
    try:
        return load_catalog(name, **pyiceberg_properties(name, catalog, settings))
    except Exception as error:  # PyIceberg raises driver-specific errors; translate them all here
        raise CatalogUnavailableError(
            f"catalog {name!r} ({catalog.kind}) could not be opened: {type(error).__name__}: "
            f"{_without_secrets(str(error), settings)}. Check its settings "
            f"(ICEPACK_CATALOGS__{name.upper()}__*) and that the service is reachable.",
            transient=is_transient(error),
        ) from None


class CatalogSet:
    """The configured catalogs, opened lazily once each."""

    def __init__(self, settings: IcepackSettings) -> None:
        self.settings = settings
        self._open = lru_cache(maxsize=None)(self._open_uncached)
        self._listing_engine = lru_cache(maxsize=None)(self._listing_engine_uncached)
        self._rest_loads: dict[str, ConditionalLoads] = {}

    def _open_uncached(self, name: str) -> Catalog:
        return open_catalog(name, self.settings)

    def get(self, name: str) -> Catalog:
        return self._open(name)

    def metadata_locations(
        self, name: str, identifiers: list[tuple[str, ...]]
    ) -> dict[tuple[str, ...], str] | None:
        """The current metadata file of each of `identifiers` (a table missing from the result does not
        exist), listed without loading any table: a SQL catalog's own table, read without PyIceberg, or
        a Glue catalog's paginated table listing through PyIceberg's Glue client. None for REST
        catalogs, which list no metadata files: each table is asked with `load_if_changed`."""
        engine = self._listing_engine(name)
        if engine is not None:
            return metadata_locations(engine, name, identifiers)
        if catalog_settings(name, self.settings).kind != "glue":
            return None
        from pyiceberg.catalog.glue import GlueCatalog

        catalog = self.get(name)
        if not isinstance(catalog, GlueCatalog):  # a Glue entry always opens one; say so if not
            raise InternalError(f"catalog {name!r} is configured as Glue but opened {type(catalog).__name__}")
        return glue_metadata_locations(catalog.glue, name, identifiers)

    def load_if_changed(self, catalog: Catalog, key: TableKey, etag: str | None) -> ConditionalLoad:
        """Table `key` of the opened `catalog`, unless the catalog says it is unchanged since the answer
        that carried `etag` (`ConditionalLoad(None, etag)`): a REST catalog whose server sends ETags is
        asked with `If-None-Match` (`catalog_listings/rest_conditional_loads.py`, whether its server
        sends them learnt once per catalog); any other catalog loads the table. Errors as `load_table`'s."""
        rest = rest_catalog_of(catalog)
        if rest is None:
            return ConditionalLoad(load_table(catalog, key), None)
        loads = self._rest_loads.setdefault(key.catalog, ConditionalLoads(rest))
        return _loading(key, lambda: loads.load(key.identifier, etag))

    def _listing_engine_uncached(self, name: str) -> SqlEngine | None:
        catalog = catalog_settings(name, self.settings)
        properties = pyiceberg_properties(name, catalog, self.settings)
        if properties["type"] != "sql":
            return None
        if isinstance(catalog, EmbeddedCatalogSettings):
            prepare_embedded_catalog(catalog, self.settings)
        return listing_engine(properties["uri"])

    @property
    def names(self) -> list[str]:
        return list(self.settings.catalogs)


def _without_secrets(message: str, settings: IcepackSettings) -> str:
    for catalog in settings.catalogs.values():
        s3 = getattr(catalog, "s3", None)
        secrets = [getattr(catalog, "password", None), getattr(catalog, "client_secret", None)]
        for secret in [*secrets, s3.secret_access_key if s3 is not None else None]:
            if secret is not None and secret.get_secret_value():
                message = message.replace(secret.get_secret_value(), "**********")
    return message


def load_table(catalog: Catalog, key: TableKey) -> Table:
    """The PyIceberg table. A missing one is `TableNotFoundError`; a catalog that keeps failing
    transiently (retried with backoff) `CatalogUnavailableError`; a bug `InternalError` (traceback
    logged); anything else `MetadataReadError`; each naming the table."""
    return _loading(key, lambda: catalog.load_table(key.identifier))


# PyIceberg's words for a schema type it has no model of (format v3's `variant` in PyIceberg 0.12)
_UNSUPPORTED_TYPE = re.compile(r"Unsupported field type: '([^']+)'")


def _loading(key: TableKey, load: Callable[[], Loaded]) -> Loaded:
    """`load` of table `key`, retried and with its errors translated as `load_table` says."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return with_retries(load)
    except (NoSuchTableError, NoSuchNamespaceError):
        raise TableNotFoundError(
            f"table {key.text} does not exist in catalog {key.catalog!r} (dropped or renamed?)"
        ) from None
    except Exception as error:  # catalogs raise driver- and storage-specific errors; translate them all
        what = f"{type(error).__name__}: {error}"
        if is_transient(error):
            raise CatalogUnavailableError(
                f"table {key.text}: catalog {key.catalog!r} did not answer after "
                f"{len(RETRY_DELAYS_SECONDS) + 1} attempts ({what}); nothing was changed, and maintenance "
                "is deferred until the catalog answers again"
            ) from error
        if is_programming_error(error):
            logger.exception("internal error while loading table %s", key.text)
            raise InternalError(
                f"table {key.text}: internal error while loading its metadata ({what}); this is a bug in "
                "icepack or PyIceberg, not a fault of the table: the traceback is in the log"
            ) from error
        unreadable_type = _UNSUPPORTED_TYPE.search(str(error))
        if unreadable_type is not None:
            raise MetadataReadError(
                f"table {key.text}: its schema holds type {unreadable_type[1]}, which this PyIceberg cannot "
                "read, so icepack can neither measure nor maintain the table; nothing was changed. A "
                f"PyIceberg that reads the type lifts this ({what})"
            ) from error
        raise MetadataReadError(f"table {key.text}: its metadata could not be loaded ({what})") from error
