"""One catalog, two engines: from one catalog's settings, the PyIceberg properties and the matching
Spark catalog configuration. Both functions read the same fields, so PyIceberg (status, discovery) and
Spark (maintenance) always address the same tables.

Pure mapping: no pyiceberg or pyspark import. The returned dictionaries contain secrets; never log them.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from icepack_dagster.config.settings import (
    CatalogSettings,
    EmbeddedCatalogSettings,
    GlueCatalogSettings,
    IcepackSettings,
    PostgresCatalogSettings,
    RestCatalogSettings,
    S3StorageSettings,
)

SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"
PY_IO_IMPL = "py-io-impl"  # PyIceberg's property naming the FileIO class
LITERAL_FILE_IO = "icepack_dagster.iceberg.local_file_io.LiteralLocalFileIO"
DELEGATION_HEADER = "header.X-Iceberg-Access-Delegation"


def embedded_paths(catalog: EmbeddedCatalogSettings, settings: IcepackSettings) -> tuple[Path, Path]:
    """(SQLite file, warehouse directory) of an embedded catalog."""
    db = (catalog.path or settings.catalog_db_path).expanduser().resolve()
    warehouse = (catalog.warehouse or settings.warehouse_path).expanduser().resolve()
    return db, warehouse


def _file_location(path: Path) -> str:
    """A local directory as a `file://` location, its path written as is, not percent-encoded: Iceberg
    (Hadoop's Path) and PyIceberg (PyArrow) both take the text after `file://` as the literal path, so
    an encoded `a%20b` would be a different directory from `a b`."""
    return f"file://{path}"


def _sqlite_url_path(db: Path) -> str:
    """The SQLite file as SQLAlchemy reads a URL's database part: percent-decoded, so it is encoded here
    (a `%`, `?` or `#` in the path then reaches SQLite unchanged)."""
    return quote(str(db), safe="/")


def _warehouse_uri(location: str) -> str:
    return location if "://" in location else _file_location(Path(location).expanduser().resolve())


def _local_file_io(location: str) -> dict[str, str]:
    """A local warehouse's tables are read with `LiteralLocalFileIO` (literal `file:` paths)."""
    local = "://" not in location or location.lower().startswith("file:")
    return {PY_IO_IMPL: LITERAL_FILE_IO} if local else {}


RESOLVING_FILE_IO = "org.apache.iceberg.io.ResolvingFileIO"  # S3FileIO for s3://, s3a://; Hadoop for files
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"


def _s3_properties(s3: S3StorageSettings | None) -> dict[str, str]:
    """PyIceberg's FileIO properties for an S3 API (PyArrow's S3 filesystem reads them)."""
    if s3 is None:
        return {}
    props = {"s3.force-virtual-addressing": str(not s3.path_style_access).lower()}
    if s3.endpoint:
        props["s3.endpoint"] = s3.endpoint
    if s3.region:
        props["s3.region"] = s3.region
    if s3.access_key_id and s3.secret_access_key is not None:
        props["s3.access-key-id"] = s3.access_key_id
        props["s3.secret-access-key"] = s3.secret_access_key.get_secret_value()
    return props


def _s3_spark_conf(prefix: str, s3: S3StorageSettings | None) -> dict[str, str]:
    """The same S3 API for Iceberg's S3FileIO in Spark (catalog properties `s3.*`, `client.region`)."""
    if s3 is None:
        return {}
    conf = {f"{prefix}.s3.path-style-access": str(s3.path_style_access).lower()}
    if s3.endpoint:
        conf[f"{prefix}.s3.endpoint"] = s3.endpoint
    if s3.region:
        conf[f"{prefix}.client.region"] = s3.region
    if s3.access_key_id and s3.secret_access_key is not None:
        conf[f"{prefix}.s3.access-key-id"] = s3.access_key_id
        conf[f"{prefix}.s3.secret-access-key"] = s3.secret_access_key.get_secret_value()
    return conf


def pyiceberg_properties(name: str, catalog: CatalogSettings, settings: IcepackSettings) -> dict[str, str]:
    """Properties for `pyiceberg.catalog.load_catalog(name, **properties)`."""
    match catalog:
        case EmbeddedCatalogSettings():
            db, warehouse = embedded_paths(catalog, settings)
            # timeout: wait for Spark's JDBC writer instead of failing with "database is locked"
            return {
                "type": "sql",
                "uri": f"sqlite:///{_sqlite_url_path(db)}?timeout=30",
                "warehouse": _file_location(warehouse),
                PY_IO_IMPL: LITERAL_FILE_IO,  # `#` and `?` in local paths, as Iceberg writes them
            }
        case PostgresCatalogSettings():
            # user and password are URL-encoded: '@', '/', ':' or '#' in them must not break the URI
            password = quote(catalog.password.get_secret_value(), safe="")
            user = quote(catalog.user, safe="")
            auth = f"{user}:{password}" if password else user
            return {
                "type": "sql",
                "uri": f"postgresql+psycopg2://{auth}@{catalog.host}:{catalog.port}/{catalog.database}"
                "?connect_timeout=10",
                "warehouse": _warehouse_uri(catalog.warehouse),
                # a pooled connection that died with a PostgreSQL restart is replaced, not used
                "pool_pre_ping": "true",
            } | _s3_properties(catalog.s3) | _local_file_io(catalog.warehouse)
        case RestCatalogSettings():
            props = {"type": "rest", "uri": catalog.uri, "warehouse": catalog.warehouse}
            if catalog.client_id and catalog.client_secret is not None:
                props["credential"] = f"{catalog.client_id}:{catalog.client_secret.get_secret_value()}"
                props["scope"] = catalog.scope
            if catalog.oauth2_server_uri:
                props["oauth2-server-uri"] = catalog.oauth2_server_uri
            if catalog.vended_credentials:
                props[DELEGATION_HEADER] = "vended-credentials"
            return props | _s3_properties(catalog.s3)
        case GlueCatalogSettings():
            props = {"type": "glue", "glue.region": catalog.region, "client.region": catalog.region}
            if catalog.catalog_id:
                props["glue.id"] = catalog.catalog_id
            if catalog.warehouse:
                props["warehouse"] = catalog.warehouse
            if catalog.endpoint:
                props["glue.endpoint"] = catalog.endpoint
            return props | _s3_properties(catalog.s3)
    raise AssertionError(f"unhandled catalog kind {catalog!r}")


def spark_catalog_conf(name: str, catalog: CatalogSettings, settings: IcepackSettings) -> dict[str, str]:
    """`spark.sql.catalog.<name>.*` settings for Iceberg's SparkCatalog over the same catalog."""
    prefix = f"spark.sql.catalog.{name}"
    # No caching: other writers commit to these tables, and maintenance must plan on fresh metadata.
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.cache-enabled": "false"}
    match catalog:
        case EmbeddedCatalogSettings():
            db, warehouse = embedded_paths(catalog, settings)
            conf |= {
                f"{prefix}.type": "jdbc",
                f"{prefix}.uri": f"jdbc:sqlite:{db}",
                f"{prefix}.warehouse": _file_location(warehouse),
                f"{prefix}.jdbc.schema-version": "V1",
                # PyIceberg creates the catalog tables; Java's start-up probe leaves SQLite read
                # transactions open (stale reads, "database is locked"), so it is switched off.
                f"{prefix}.jdbc.init-catalog-tables": "false",
            }
        case PostgresCatalogSettings():
            conf |= {
                f"{prefix}.type": "jdbc",
                f"{prefix}.uri": f"jdbc:postgresql://{catalog.host}:{catalog.port}/{catalog.database}"
                "?connectTimeout=10",
                f"{prefix}.jdbc.user": catalog.user,
                f"{prefix}.warehouse": _warehouse_uri(catalog.warehouse),
                f"{prefix}.jdbc.schema-version": "V1",
                f"{prefix}.jdbc.init-catalog-tables": "false",
            }
            if catalog.password.get_secret_value():
                conf[f"{prefix}.jdbc.password"] = catalog.password.get_secret_value()
            if catalog.s3 is not None:
                conf[f"{prefix}.io-impl"] = RESOLVING_FILE_IO
                conf |= _s3_spark_conf(prefix, catalog.s3)
        case RestCatalogSettings():
            conf |= _rest_spark_conf(prefix, catalog)
        case GlueCatalogSettings():
            conf |= {
                f"{prefix}.type": "glue",
                f"{prefix}.io-impl": S3_FILE_IO,
                f"{prefix}.client.region": catalog.region,
            }
            if catalog.catalog_id:
                conf[f"{prefix}.glue.id"] = catalog.catalog_id
            if catalog.warehouse:
                conf[f"{prefix}.warehouse"] = catalog.warehouse
            if catalog.endpoint:
                conf[f"{prefix}.glue.endpoint"] = catalog.endpoint
            conf |= _s3_spark_conf(prefix, catalog.s3)
    return conf


def _rest_spark_conf(prefix: str, catalog: RestCatalogSettings) -> dict[str, str]:
    """A REST catalog's Spark settings: endpoint, OAuth2 client credentials, vended credentials."""
    conf = {f"{prefix}.type": "rest", f"{prefix}.uri": catalog.uri, f"{prefix}.warehouse": catalog.warehouse}
    if catalog.client_id and catalog.client_secret is not None:
        conf[f"{prefix}.credential"] = f"{catalog.client_id}:{catalog.client_secret.get_secret_value()}"
        conf[f"{prefix}.scope"] = catalog.scope
    if catalog.oauth2_server_uri:
        conf[f"{prefix}.oauth2-server-uri"] = catalog.oauth2_server_uri
    if catalog.vended_credentials:
        conf[f"{prefix}.{DELEGATION_HEADER}"] = "vended-credentials"
    if catalog.s3 is not None:
        conf[f"{prefix}.io-impl"] = RESOLVING_FILE_IO
        conf |= _s3_spark_conf(prefix, catalog.s3)
    return conf


def jdbc_driver_jars(settings: IcepackSettings) -> list[str]:
    """The JDBC driver jars Spark needs for the configured SQL catalogs (Debian packages provide them)."""
    jars = []
    kinds = {type(c) for c in settings.catalogs.values()}
    if EmbeddedCatalogSettings in kinds:
        jars.append(SQLITE_JDBC_JAR)
    if PostgresCatalogSettings in kinds:
        jars.append(POSTGRES_JDBC_JAR)
    return jars


def needs_aws_bundle(settings: IcepackSettings) -> bool:
    """Whether Spark needs the AWS SDK bundle: a Glue or REST catalog (whose tables usually sit on S3),
    or a warehouse on `s3://`/`s3a://`."""
    for catalog in settings.catalogs.values():
        if isinstance(catalog, GlueCatalogSettings | RestCatalogSettings):
            return True
        if isinstance(catalog, PostgresCatalogSettings) and (
            catalog.s3 is not None or catalog.warehouse.startswith(("s3://", "s3a://"))
        ):
            return True
    return False


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
