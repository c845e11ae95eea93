"""An Iceberg SQL (JDBC) catalog whose tables live in PostgreSQL: PyIceberg reaches it through
SQLAlchemy and psycopg2, Spark through Iceberg's JDBC catalog; its warehouse is local or on S3."""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote

from pydantic import Field, SecretStr

from icepack_dagster.config.catalogs.base import CatalogHome, CatalogKind, local_file_io, warehouse_uri
from icepack_dagster.config.catalogs.s3_storage import (
    RESOLVING_FILE_IO,
    S3StorageSettings,
    s3_properties,
    s3_spark_conf,
)

POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"


class PostgresCatalogSettings(CatalogKind):
    """An Iceberg SQL (JDBC) catalog whose tables live in PostgreSQL."""

    jdbc_driver_jar = POSTGRES_JDBC_JAR

    kind: Literal["postgres"] = "postgres"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = Field(min_length=1)
    user: str = Field(min_length=1)
    password: SecretStr = SecretStr("")
    warehouse: str = Field(min_length=1, description="Warehouse location: a path or file://, s3:// URI")
    s3: S3StorageSettings | None = Field(default=None, description="How to reach s3:// locations")

    def pyiceberg_properties(self, home: CatalogHome) -> dict[str, str]:
        # user and password are URL-encoded: '@', '/', ':' or '#' in them must not break the URI
        password = quote(self.password.get_secret_value(), safe="")
        user = quote(self.user, safe="")
        auth = f"{user}:{password}" if password else user
        return {
            "type": "sql",
            "uri": f"postgresql+psycopg2://{auth}@{self.host}:{self.port}/{self.database}"
            "?connect_timeout=10",
            "warehouse": warehouse_uri(self.warehouse),
            # a pooled connection that died with a PostgreSQL restart is replaced, not used
            "pool_pre_ping": "true",
        } | s3_properties(self.s3) | local_file_io(self.warehouse)

    def spark_conf(self, prefix: str, home: CatalogHome) -> dict[str, str]:
        conf = {
            f"{prefix}.type": "jdbc",
            f"{prefix}.uri": f"jdbc:postgresql://{self.host}:{self.port}/{self.database}?connectTimeout=10",
            f"{prefix}.jdbc.user": self.user,
            f"{prefix}.warehouse": warehouse_uri(self.warehouse),
            f"{prefix}.jdbc.schema-version": "V1",
            f"{prefix}.jdbc.init-catalog-tables": "false",
        }
        if self.password.get_secret_value():
            conf[f"{prefix}.jdbc.password"] = self.password.get_secret_value()
        if self.s3 is not None:
            conf[f"{prefix}.io-impl"] = RESOLVING_FILE_IO
            conf |= s3_spark_conf(prefix, self.s3)
        return conf

    def needs_aws_bundle(self) -> bool:
        return self.s3 is not None or self.warehouse.startswith(("s3://", "s3a://"))
