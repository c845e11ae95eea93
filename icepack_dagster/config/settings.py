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
from typing import Any
from urllib.parse import quote

import yaml
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from icepack_dagster.config.catalogs import CatalogSettings, default_catalogs
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.spark import SparkSettings
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.exceptions import ConfigurationError

PLATFORM_ENV_PREFIX = "ICEPACK_PLATFORM_"
_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class IcepackSettings(BaseSettings):
    """Everything icepack_dagster needs to know, from one place."""

    model_config = SettingsConfigDict(
        env_prefix="ICEPACK_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    home: Path = Field(default=Path("~/.icepack"), description="Embedded catalog, warehouse and state")
    catalogs: dict[str, CatalogSettings] = Field(default_factory=lambda: default_catalogs())
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
        description="Maintenance history older than this is pruned (by the platform's daily housekeeping "
        "job, or `icepack history prune`), except each table's newest runs that quarantine counts and its "
        "newest success of each action",
    )
    maintenance_lease_seconds: int = Field(
        default=600,
        ge=30,
        le=86_400,
        description="How long a table's maintenance lease lasts unless its holder renews it (every third "
        "of it); the longest a crashed maintenance can keep the table from being maintained",
    )
    status_workers: int = Field(default=8, ge=1, le=64, description="Manifests read in parallel")
    status_from_summaries: bool = Field(
        default=True,
        description="A health sync measures a table changed only by appends from its snapshot summaries "
        "and manifest list when that cannot change its health or plan (docs/STATUS.md); false reads "
        "the manifests of every changed table",
    )
    store_manifest_summaries: bool = Field(
        default=True,
        description="Keep manifest summaries in the state database, so a new process (a health-sync run) "
        "decodes only manifests no earlier process read",
    )
    platform: PlatformSettings = Field(
        default_factory=PlatformSettings,
        description="Dagster schedule, sensors and caps (docs/CONFIGURATION.md)",
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
    """The platform section under its own prefix, `ICEPACK_PLATFORM_<FIELD>` (the names
    docs/CONFIGURATION.md and the Helm values use), besides the nested `ICEPACK_PLATFORM__<FIELD>`."""

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


def java_home() -> str | None:
    """`JAVA_HOME`, read outside the `ICEPACK_` prefix: Spark's launcher reads it too, and the check that
    a JVM exists must look where Spark will."""
    return os.environ.get("JAVA_HOME")


def dagster_home() -> str | None:
    """`DAGSTER_HOME`, read outside the `ICEPACK_` prefix: `DagsterInstance.get()` reads it too, and the
    check that it holds an instance config must look where Dagster will."""
    return os.environ.get("DAGSTER_HOME")


def child_environment(without_prefixes: tuple[str, ...]) -> dict[str, str]:
    """This process's environment for a child process icepack starts (the Spark Connect server), minus
    the variables whose names start with `without_prefixes`; read here, as every environment read is."""
    return {k: v for k, v in os.environ.items() if not k.startswith(without_prefixes)}


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
