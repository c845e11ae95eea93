"""How both engines reach the S3 API that holds a catalog's tables (PostgreSQL, REST and Glue catalogs
may say it): the validated settings, PyIceberg's FileIO properties and Iceberg's S3FileIO settings in
Spark, from the same fields."""

from __future__ import annotations

from pydantic import Field, SecretStr, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel

RESOLVING_FILE_IO = "org.apache.iceberg.io.ResolvingFileIO"  # S3FileIO for s3://, s3a://; Hadoop for files
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"


class S3StorageSettings(FrozenModel):
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


def s3_properties(s3: S3StorageSettings | None) -> dict[str, str]:
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


def s3_spark_conf(prefix: str, s3: S3StorageSettings | None) -> dict[str, str]:
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
