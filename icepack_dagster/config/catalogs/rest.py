"""An Iceberg REST catalog such as Apache Polaris, with OAuth2 client credentials and, where the catalog
vends them, storage credentials per table."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from icepack_dagster.config.catalogs.base import CatalogHome, CatalogKind
from icepack_dagster.config.catalogs.s3_storage import (
    RESOLVING_FILE_IO,
    S3StorageSettings,
    s3_properties,
    s3_spark_conf,
)

DELEGATION_HEADER = "header.X-Iceberg-Access-Delegation"


class RestCatalogSettings(CatalogKind):
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

    def pyiceberg_properties(self, home: CatalogHome) -> dict[str, str]:
        props = {"type": "rest", "uri": self.uri, "warehouse": self.warehouse}
        if self.client_id and self.client_secret is not None:
            props["credential"] = f"{self.client_id}:{self.client_secret.get_secret_value()}"
            props["scope"] = self.scope
        if self.oauth2_server_uri:
            props["oauth2-server-uri"] = self.oauth2_server_uri
        if self.vended_credentials:
            props[DELEGATION_HEADER] = "vended-credentials"
        return props | s3_properties(self.s3)

    def spark_conf(self, prefix: str, home: CatalogHome) -> dict[str, str]:
        """Endpoint, OAuth2 client credentials, vended credentials."""
        conf = {f"{prefix}.type": "rest", f"{prefix}.uri": self.uri, f"{prefix}.warehouse": self.warehouse}
        if self.client_id and self.client_secret is not None:
            conf[f"{prefix}.credential"] = f"{self.client_id}:{self.client_secret.get_secret_value()}"
            conf[f"{prefix}.scope"] = self.scope
        if self.oauth2_server_uri:
            conf[f"{prefix}.oauth2-server-uri"] = self.oauth2_server_uri
        if self.vended_credentials:
            conf[f"{prefix}.{DELEGATION_HEADER}"] = "vended-credentials"
        if self.s3 is not None:
            conf[f"{prefix}.io-impl"] = RESOLVING_FILE_IO
            conf |= s3_spark_conf(prefix, self.s3)
        return conf

    def needs_aws_bundle(self) -> bool:
        return True  # its tables usually sit on S3
