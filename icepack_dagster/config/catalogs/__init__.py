"""The catalog kinds icepack can reach, one module each (`embedded`, `postgres`, `rest`, `glue`), and the
registry that lists them: `CatalogSettings` is what a catalog entry in the settings may be, told apart
by its `kind`. Each kind owns its validated model and the PyIceberg and Spark properties it produces;
adding one is a new module, a line in `CatalogSettings` and `CATALOG_KINDS`, and its tests.

Pure mapping: no pyiceberg or pyspark import. The returned dictionaries contain secrets; never log them.
"""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import Field

from icepack_dagster.config.catalogs.base import CatalogHome, CatalogKind
from icepack_dagster.config.catalogs.embedded import SQLITE_JDBC_JAR, EmbeddedCatalogSettings, embedded_paths
from icepack_dagster.config.catalogs.glue import GlueCatalogSettings
from icepack_dagster.config.catalogs.postgres import POSTGRES_JDBC_JAR, PostgresCatalogSettings
from icepack_dagster.config.catalogs.rest import RestCatalogSettings
from icepack_dagster.config.catalogs.s3_storage import S3StorageSettings

__all__ = [
    "CATALOG_KINDS",
    "POSTGRES_JDBC_JAR",
    "SQLITE_JDBC_JAR",
    "CatalogSettings",
    "EmbeddedCatalogSettings",
    "GlueCatalogSettings",
    "PostgresCatalogSettings",
    "RestCatalogSettings",
    "S3StorageSettings",
    "default_catalogs",
    "embedded_paths",
    "jdbc_driver_jars",
    "needs_aws_bundle",
    "pyiceberg_properties",
    "redact_conf",
    "spark_catalog_conf",
]

CatalogSettings = Annotated[
    EmbeddedCatalogSettings | PostgresCatalogSettings | RestCatalogSettings | GlueCatalogSettings,
    Field(discriminator="kind"),
]
CATALOG_KINDS: tuple[type[CatalogKind], ...] = (
    EmbeddedCatalogSettings,
    PostgresCatalogSettings,
    RestCatalogSettings,
    GlueCatalogSettings,
)


class ConfiguredCatalogs(CatalogHome, Protocol):
    """What the registry's functions read from the settings: the catalogs and the icepack home."""

    @property
    def catalogs(self) -> dict[str, CatalogSettings]: ...


def default_catalogs() -> dict[str, CatalogSettings]:
    return {"lake": EmbeddedCatalogSettings()}


def pyiceberg_properties(name: str, catalog: CatalogKind, home: CatalogHome) -> dict[str, str]:
    """Properties for `pyiceberg.catalog.load_catalog(name, **properties)`."""
    return catalog.pyiceberg_properties(home)


def spark_catalog_conf(name: str, catalog: CatalogKind, home: CatalogHome) -> dict[str, str]:
    """`spark.sql.catalog.<name>.*` settings for Iceberg's SparkCatalog over the same catalog."""
    prefix = f"spark.sql.catalog.{name}"
    # No caching: other writers commit to these tables, and maintenance must plan on fresh metadata.
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.cache-enabled": "false"}
    return conf | catalog.spark_conf(prefix, home)


def jdbc_driver_jars(settings: ConfiguredCatalogs) -> list[str]:
    """The JDBC driver jars Spark needs for the configured SQL catalogs (Debian packages provide them)."""
    kinds = {type(c) for c in settings.catalogs.values()}
    return [kind.jdbc_driver_jar for kind in CATALOG_KINDS if kind in kinds and kind.jdbc_driver_jar]


def needs_aws_bundle(settings: ConfiguredCatalogs) -> bool:
    """Whether Spark needs the AWS SDK bundle: a Glue or REST catalog (whose tables usually sit on S3),
    or a warehouse on `s3://`/`s3a://`."""
    return any(catalog.needs_aws_bundle() for catalog in settings.catalogs.values())


SECRET_CONF_SUFFIXES = (
    ".credential",
    ".jdbc.password",
    ".token",
    ".client_secret",
    ".secret-access-key",
    ".session-token",
)


def redact_conf(conf: dict[str, str]) -> dict[str, str]:
    """A copy of Spark or PyIceberg configuration that is safe to show: secrets masked."""
    redacted = {}
    for key, value in conf.items():
        if key.endswith(SECRET_CONF_SUFFIXES) or key in ("credential", "token"):
            redacted[key] = "**********"
        elif key == "uri" and "@" in value and "://" in value:
            scheme, rest = value.split("://", 1)
            redacted[key] = f"{scheme}://**********@{rest.split('@', 1)[1]}"
        else:
            redacted[key] = value
    return redacted
