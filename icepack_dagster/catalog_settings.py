"""What a catalog entry in the settings may say: an embedded SQLite catalog, a PostgreSQL (JDBC)
catalog, a REST catalog, AWS Glue, and how each reaches S3. Validated here, so that a half-configured
catalog fails at start-up naming the field; turned into client properties by `catalog_config.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EmbeddedCatalogSettings(_Model):
    """A SQLite catalog file and a local warehouse directory, under the icepack home by default."""

    kind: Literal["embedded"] = "embedded"
    path: Path | None = Field(default=None, description="SQLite catalog file; default HOME/catalog.db")
    warehouse: Path | None = Field(default=None, description="Warehouse directory; default HOME/warehouse")


class S3StorageSettings(_Model):
    """How both engines reach the S3 API that holds a catalog's tables: AWS itself (every field left
    out; credentials from the environment or workload identity), or an S3-compatible store (MinIO,
    Ceph, a local emulator) at `endpoint`, usually with path-style addressing and its own keys."""

    endpoint: str | None = Field(default=None, description="S3 API URL, e.g. http://minio:9000; default AWS")
    region: str | None = Field(default=None, description="Signing region, e.g. eu-west-1")
    path_style_access: bool = Field(
        default=False, description="Address buckets in the path (http://host/bucket/key), not the host name"
    )
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None

    @model_validator(mode="after")
    def _both_key_parts(self) -> S3StorageSettings:
        has_id = bool(self.access_key_id)
        has_secret = self.secret_access_key is not None and bool(self.secret_access_key.get_secret_value())
        if has_id != has_secret:
            missing = "secret_access_key" if has_id else "access_key_id"
            raise ValueError(
                f"s3: {missing} is missing; set both access_key_id and secret_access_key, or neither "
                "(credentials then come from the environment)"
            )
        return self


class PostgresCatalogSettings(_Model):
    """An Iceberg SQL (JDBC) catalog whose tables live in PostgreSQL."""

    kind: Literal["postgres"] = "postgres"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = Field(min_length=1)
    user: str = Field(min_length=1)
    password: SecretStr = SecretStr("")
    warehouse: str = Field(min_length=1, description="Warehouse location: a path or file://, s3:// URI")
    s3: S3StorageSettings | None = Field(default=None, description="How to reach s3:// locations")


class RestCatalogSettings(_Model):
    """An Iceberg REST catalog such as Apache Polaris, with OAuth2 client credentials."""

    kind: Literal["rest"] = "rest"
    uri: str = Field(min_length=1, description="REST endpoint, e.g. https://polaris.example.com/api/catalog")
    warehouse: str = Field(min_length=1, description="The catalog name inside Polaris")
    client_id: str | None = None
    client_secret: SecretStr | None = None
    scope: str = "PRINCIPAL_ROLE:ALL"
    oauth2_server_uri: str | None = None
    vended_credentials: bool = Field(
        default=False, description="Send X-Iceberg-Access-Delegation: vended-credentials"
    )
    s3: S3StorageSettings | None = Field(
        default=None, description="How to reach s3:// locations when the catalog does not vend credentials"
    )

    @model_validator(mode="after")
    def _both_credential_parts(self) -> RestCatalogSettings:
        has_id = bool(self.client_id)
        has_secret = self.client_secret is not None and bool(self.client_secret.get_secret_value())
        if has_id != has_secret:
            missing = "client_secret" if has_id else "client_id"
            raise ValueError(
                f"REST catalog {self.uri}: {missing} is missing; set both client_id and client_secret "
                "(OAuth2 client credentials) or neither"
            )
        return self


class GlueCatalogSettings(_Model):
    """AWS Glue as the catalog, S3 as storage. Glue's credentials come from the environment or workload
    identity, never keys here; `endpoint` points the catalog at another Glue API (an emulator)."""

    kind: Literal["glue"] = "glue"
    region: str = Field(min_length=1)
    warehouse: str | None = Field(default=None, description="s3:// location for new tables")
    catalog_id: str | None = Field(default=None, description="AWS account id owning the Glue catalog")
    endpoint: str | None = Field(default=None, description="Glue API URL; default AWS's for the region")
    s3: S3StorageSettings | None = Field(default=None, description="How to reach the tables' s3:// locations")


CatalogSettings = Annotated[
    EmbeddedCatalogSettings | PostgresCatalogSettings | RestCatalogSettings | GlueCatalogSettings,
    Field(discriminator="kind"),
]


def default_catalogs() -> dict[str, CatalogSettings]:
    return {"lake": EmbeddedCatalogSettings()}
