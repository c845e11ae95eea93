"""AWS Glue as the catalog, S3 as storage. Glue's credentials come from the environment or workload
identity, never keys here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from icepack_dagster.config.catalogs.base import CatalogHome, CatalogKind
from icepack_dagster.config.catalogs.s3_storage import (
    S3_FILE_IO,
    S3StorageSettings,
    s3_properties,
    s3_spark_conf,
)


class GlueCatalogSettings(CatalogKind):
    """AWS Glue as the catalog, S3 as storage. Glue's credentials come from the environment or workload
    identity, never keys here; `endpoint` points the catalog at another Glue API (an emulator)."""

    kind: Literal["glue"] = "glue"
    region: str = Field(min_length=1)
    warehouse: str | None = Field(default=None, description="s3:// location for new tables")
    catalog_id: str | None = Field(default=None, description="AWS account id owning the Glue catalog")
    endpoint: str | None = Field(default=None, description="Glue API URL; default AWS's for the region")
    s3: S3StorageSettings | None = Field(default=None, description="How to reach the tables' s3:// locations")

    def pyiceberg_properties(self, home: CatalogHome) -> dict[str, str]:
        props = {"type": "glue", "glue.region": self.region, "client.region": self.region}
        if self.catalog_id:
            props["glue.id"] = self.catalog_id
        if self.warehouse:
            props["warehouse"] = self.warehouse
        if self.endpoint:
            props["glue.endpoint"] = self.endpoint
        return props | s3_properties(self.s3)

    def spark_conf(self, prefix: str, home: CatalogHome) -> dict[str, str]:
        conf = {
            f"{prefix}.type": "glue",
            f"{prefix}.io-impl": S3_FILE_IO,
            f"{prefix}.client.region": self.region,
        }
        if self.catalog_id:
            conf[f"{prefix}.glue.id"] = self.catalog_id
        if self.warehouse:
            conf[f"{prefix}.warehouse"] = self.warehouse
        if self.endpoint:
            conf[f"{prefix}.glue.endpoint"] = self.endpoint
        return conf | s3_spark_conf(prefix, self.s3)

    def needs_aws_bundle(self) -> bool:
        return True
