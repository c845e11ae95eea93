"""Settings: the only module that reads the environment.

Sources, strongest first: `ICEPACK_*` environment variables (nested with `__`, e.g.
`ICEPACK_SPARK__MASTER`; the platform section also as `ICEPACK_PLATFORM_<FIELD>`), then the YAML file
named by `ICEPACK_CONFIG` (pydantic-settings' YAML source), then the defaults below.
With no configuration at all you get one embedded catalog, `lake`: a SQLite catalog file and a local
warehouse under `ICEPACK_HOME` (default `~/.icepack`). A half-configured catalog fails at start-up
naming the field. Secrets are `SecretStr`: they print as `**********` and are revealed only where a
client library needs them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from icepack_dagster.domain.health_thresholds import HealthThresholds
from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.platform_settings import PlatformSettings

PLATFORM_ENV_PREFIX = "ICEPACK_PLATFORM_"
_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def _default_catalogs() -> dict[str, CatalogSettings]:
    return {"lake": EmbeddedCatalogSettings()}


_SPARK_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|k8s://.+|sc://.+|yarn)$")


class SparkSettings(_Model):
    """How maintenance reaches Spark: master URL, jars, and extra Spark configuration.

    An `sc://` master is a Spark Connect server: its JVM, jars and static configuration are the
    server's, so `jars` and `driver_memory` do not apply and `conf` may hold only `spark.sql.*` keys."""

    master: str = Field(
        default="local[*]", description="local[*], spark://host:7077, k8s://https://..., sc://host:15002"
    )
    app_name: str = "icepack"
    jars: list[str] | None = Field(
        default=None,
        description="Jars for the driver classpath; default: the pinned Iceberg runtime (and AWS bundle "
        "where a catalog needs S3) from the jar cache, plus the JDBC drivers the catalogs need",
    )
    jar_cache: Path = Field(
        default=Path("~/.cache/icepack/jars"),
        validate_default=True,
        description="Where `icepack jars fetch` keeps the pinned Maven Central jars the sessions load",
    )
    maven_repository: str = Field(
        default="https://repo1.maven.org/maven2",
        description="Maven repository `icepack jars fetch` downloads from (Maven Central or a mirror)",
    )
    driver_memory: str = "2g"
    conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings")
    connect_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, description="How long an sc:// master may take to answer at start"
    )

    @field_validator("jar_cache")
    @classmethod
    def _expand_jar_cache(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("master")
    @classmethod
    def _known_master(cls, value: str) -> str:
        if not _SPARK_MASTER.match(value):
            raise ValueError(f"{value!r} is not a Spark master URL (local[*], spark://, k8s://, sc://, yarn)")
        if value.startswith("sc://") and ";session_id=" in value:
            raise ValueError(
                "an sc:// master may not fix session_id: icepack opens one server session per table"
            )
        return value

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not k.startswith("spark.")]
        if bad:
            raise ValueError(f"Spark conf keys must start with 'spark.': {bad}")
        return value

    @model_validator(mode="after")
    def _connect_conf(self) -> SparkSettings:
        server_keys = [k for k in self.conf if not k.startswith("spark.sql.")]
        if self.master.startswith("sc://") and server_keys:
            raise ValueError(
                f"conf keys {server_keys} configure the Spark JVM, which for an sc:// master is the Spark "
                "Connect server's: set them where the server starts; a Connect session takes spark.sql.* only"
            )
        return self


class IcepackSettings(BaseSettings):
    """Everything icepack_dagster needs to know, from one place."""

    model_config = SettingsConfigDict(
        env_prefix="ICEPACK_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    home: Path = Field(default=Path("~/.icepack"), description="Embedded catalog, warehouse and state")
    catalogs: dict[str, CatalogSettings] = Field(default_factory=lambda: _default_catalogs())
    default_catalog: str | None = Field(default=None, description="Catalog meant by 'ns.table'")
    include: list[str] = Field(default_factory=lambda: ["*"], description="Table patterns to manage")
    exclude: list[str] = Field(default_factory=list, description="Table patterns to leave alone")
    spark: SparkSettings = Field(default_factory=SparkSettings)
    thresholds: HealthThresholds = Field(default_factory=HealthThresholds)
    policy_file: Path | None = Field(default=None, description="YAML policy rules (docs/POLICY.md)")
    state_url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL of the maintenance history (a secret: it may hold the database "
        "password); default SQLite under home",
    )
    history_retention_days: int = Field(
        default=90,
        ge=1,
        description="Maintenance history older than this is pruned (`icepack history prune`), except each "
        "table's newest runs that quarantine counts and its newest success of each action",
    )
    maintenance_lease_seconds: int = Field(
        default=600,
        ge=30,
        le=86_400,
        description="How long a table's maintenance lease lasts unless its holder renews it (every third "
        "of it); the longest a crashed maintenance can keep the table from being maintained",
    )
    status_workers: int = Field(default=8, ge=1, le=64, description="Manifests read in parallel")
    store_manifest_summaries: bool = Field(
        default=True,
        description="Keep manifest summaries in the state database, so a new process (a health-sync run) "
        "decodes only manifests no earlier process read",
    )
    platform: PlatformSettings = Field(
        default_factory=PlatformSettings, description="Dagster schedule, sensors and caps (docs/DAGSTER.md)"
    )

    @field_validator("home")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("catalogs")
    @classmethod
    def _catalog_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("at least one catalog must be configured")
        for name in value:
            if not _CATALOG_NAME.match(name):
                raise ValueError(
                    f"catalog name {name!r} must be letters, digits and '_' (it names a Spark catalog)"
                )
        return value

    @model_validator(mode="after")
    def _default_catalog_exists(self) -> IcepackSettings:
        if self.default_catalog is not None and self.default_catalog not in self.catalogs:
            raise ValueError(
                f"default_catalog {self.default_catalog!r} is not among the catalogs {sorted(self.catalogs)}"
            )
        return self

    @property
    def primary_catalog(self) -> str:
        """The catalog meant when a table is named without one."""
        return self.default_catalog or next(iter(self.catalogs))

    @property
    def catalog_db_path(self) -> Path:
        return self.home / "catalog.db"

    @property
    def warehouse_path(self) -> Path:
        return self.home / "warehouse"

    @property
    def resolved_state_url(self) -> str:
        if self.state_url is not None and self.state_url.get_secret_value():
            return self.state_url.get_secret_value()
        # SQLAlchemy percent-decodes a URL's database part: encode the path so '%' or '#' in it survive
        return f"sqlite:///{quote(str(self.home / 'state.db'), safe='/')}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources = [init_settings, env_settings, _PlatformEnvSource()]
        config = os.environ.get("ICEPACK_CONFIG")
        return (*sources, _yaml_source(settings_cls, config)) if config else tuple(sources)


class _PlatformEnvSource(EnvSettingsSource):
    """The platform section under its own prefix, `ICEPACK_PLATFORM_<FIELD>` (the names docs/DAGSTER.md
    and the Helm values use), besides the nested `ICEPACK_PLATFORM__<FIELD>`."""

    def __init__(self) -> None:
        super().__init__(PlatformSettings, env_prefix=PLATFORM_ENV_PREFIX)  # type: ignore[arg-type]

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        return {"platform": values} if values else {}


def _yaml_source(settings_cls: type[BaseSettings], path: str) -> YamlConfigSettingsSource:
    """The YAML file named by ICEPACK_CONFIG; a missing, unparsable or non-mapping file is an error that
    names the file, never silently no settings."""
    if not Path(path).is_file():
        raise ConfigurationError(f"ICEPACK_CONFIG={path}: cannot read the file (no such file)")
    try:
        return YamlConfigSettingsSource(settings_cls, yaml_file=path)
    except OSError as error:
        raise ConfigurationError(f"ICEPACK_CONFIG={path}: cannot read the file ({error})") from error
    except yaml.YAMLError as error:
        raise ConfigurationError(f"ICEPACK_CONFIG={path}: not valid YAML ({error})") from error
    except (TypeError, ValueError) as error:
        raise ConfigurationError(f"ICEPACK_CONFIG={path}: the top level must be a mapping") from error


def _field_name(location: tuple[int | str, ...]) -> str:
    """A bad field as the YAML path, and for the platform section also its environment variable."""
    field = ".".join(str(part) for part in location)
    if len(location) == 2 and location[0] == "platform":
        return f"{field} ({PLATFORM_ENV_PREFIX}{str(location[1]).upper()})"
    return field


def load_settings(**overrides: Any) -> IcepackSettings:
    """Build settings from the environment and the config file, turning validation errors into one
    `ConfigurationError` that names each offending field (never its secret value)."""
    try:
        return IcepackSettings(**overrides)
    except ValidationError as error:
        lines = []
        for problem in error.errors(include_input=False, include_url=False):
            lines.append(f"  {_field_name(problem['loc'])}: {problem['msg']}")
        raise ConfigurationError("invalid icepack settings:\n" + "\n".join(lines)) from None
