"""What every catalog kind is: a validated model of one catalog entry in the settings that produces the
PyIceberg properties and the Spark catalog settings of the same catalog, so PyIceberg (status,
discovery) and Spark (maintenance) always address the same tables. A half-configured catalog fails at
start-up naming the field. The produced dictionaries contain secrets; never log them (`redact_conf`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Protocol

from icepack_dagster.domain.frozen_model import FrozenModel

PY_IO_IMPL = "py-io-impl"  # PyIceberg's property naming the FileIO class
LITERAL_FILE_IO = "icepack_dagster.iceberg.local_file_io.LiteralLocalFileIO"


class CatalogHome(Protocol):
    """Where a catalog without its own paths lives: under the icepack home (the settings provide it)."""

    @property
    def catalog_db_path(self) -> Path: ...

    @property
    def warehouse_path(self) -> Path: ...


class CatalogKind(FrozenModel, ABC):
    """One kind of catalog; each kind is a module of this package and a line of its registry."""

    jdbc_driver_jar: ClassVar[str | None] = None  # the JDBC driver Spark needs for this kind, if any

    @abstractmethod
    def pyiceberg_properties(self, home: CatalogHome) -> dict[str, str]:
        """Properties for `pyiceberg.catalog.load_catalog(name, **properties)`."""

    @abstractmethod
    def spark_conf(self, prefix: str, home: CatalogHome) -> dict[str, str]:
        """This kind's `spark.sql.catalog.<name>.*` settings (`prefix` is `spark.sql.catalog.<name>`)."""

    def needs_aws_bundle(self) -> bool:
        """Whether Spark needs the AWS SDK bundle to reach this catalog or its tables."""
        return False


def file_location(path: Path) -> str:
    """A local directory as a `file://` location, its path written as is, not percent-encoded: Iceberg
    (Hadoop's Path) and PyIceberg (PyArrow) both take the text after `file://` as the literal path, so
    an encoded `a%20b` would be a different directory from `a b`."""
    return f"file://{path}"


def warehouse_uri(location: str) -> str:
    return location if "://" in location else file_location(Path(location).expanduser().resolve())


def local_file_io(location: str) -> dict[str, str]:
    """A local warehouse's tables are read with `LiteralLocalFileIO` (literal `file:` paths)."""
    local = "://" not in location or location.lower().startswith("file:")
    return {PY_IO_IMPL: LITERAL_FILE_IO} if local else {}
