"""`IcepackComponent`: icepack added to a Dagster project the way dbt or Sling is, as a `dg.Component`
configured in a `defs.yaml` (`dg scaffold defs icepack_dagster.IcepackComponent <folder>`).

Its attributes are icepack's settings (docs/CONFIGURATION.md) under the names a host project reads:
which catalogs and tables, the `platform` section, the deployment's `name`, the asset group and owners,
and whether its sensors and schedules start running. An attribute the YAML leaves out comes from where
the standalone code location reads it (`ICEPACK_*` variables, the `ICEPACK_CONFIG` file, the defaults),
so the code location icepack ships is this component with a nearly empty YAML (`location/`). Secrets
are never values in the YAML: a field holding one names an environment variable through Dagster's
template, `"{{ env.POLARIS_CLIENT_SECRET }}"`, read when the code location loads and kept as a secret
in the settings, which no run config, tag or UI page shows; the component's own repr leaves out every
attribute that may hold one.
"""

from collections.abc import Callable
from typing import Annotated, Any, Literal

import dagster as dg
import jinja2
from pydantic import Field

from icepack_dagster.component.scaffolder import IcepackScaffolder
from icepack_dagster.component.secret_attributes import (
    SecretPath,
    at,
    catalog_secret_paths,
    platform_secret_paths,
    refuse_literal_secrets,
    state_url_secret_paths,
)
from icepack_dagster.config.platform import DEPLOYMENT_NAME_PATTERN
from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.maintenance_pool import store_at_load
from icepack_dagster.exceptions import ConfigurationError

# Attributes that may hold a secret (resolved from '{{ env.VARIABLE }}') stay out of the component's repr.
_SECRET = Field(repr=False)


def _described(description: str) -> dg.Resolver:
    """An attribute's description, as `dg` and the UI's Docs tab show it."""
    return dg.Resolver.default(description=description)


def _secret_text(context: dg.ResolutionContext, template: str, name: str) -> str:
    """A secret's template rendered as text. Dagster renders templates natively, turning a value that
    reads as a Python literal into one ('012' stays text, '123' becomes 123, "'x'" loses its quotes),
    which would change a password; a template naming an unset variable is an error, not 'None'."""

    def present(value: Any) -> Any:
        if value is None:
            raise ConfigurationError(
                f"IcepackComponent: {name} ({template}) resolves to nothing: set the environment variable "
                "it names"
            )
        return value

    return jinja2.Environment(finalize=present).from_string(template).render(**context.scope)


def _holding_secrets(
    attribute: str, secret_paths: Callable[[Any], list[SecretPath]], model_type: Any, description: str
) -> dg.Resolver:
    """A described attribute whose secrets (`secret_attributes.py`) must be templates in the YAML, checked
    on the YAML as written, and are rendered as text."""

    def resolve(context: dg.ResolutionContext, raw: Any) -> Any:
        paths = secret_paths(raw)
        refuse_literal_secrets(attribute, raw, paths)
        resolved = context.resolve_value(raw)
        for path in paths:
            text = _secret_text(context, at(raw, path), ".".join((attribute, *path)))
            if not path:
                return text
            at(resolved, path[:-1])[path[-1]] = text
        return resolved

    return dg.Resolver(
        resolve, model_field_type=model_type, description=description, inject_before_resolve=False
    )


@dg.scaffold_with(IcepackScaffolder)
class IcepackComponent(dg.Component, dg.Model, dg.Resolvable):
    """Keeps the Apache Iceberg tables of the configured catalogs healthy.

    One dynamic partition per table, status and health synced on a schedule, maintenance (compaction,
    snapshot expiry, orphan removal) launched by a sensor within a concurrency pool, a fleet summary.
    Attributes left out come from `ICEPACK_*` variables and the `ICEPACK_CONFIG` file
    (docs/CONFIGURATION.md)."""

    name: Annotated[
        str | None,
        Field(pattern=DEPLOYMENT_NAME_PATTERN),
        _described(
            "This icepack deployment's name (lowercase letters, digits, '_'; default 'icepack'): its "
            "partitions definition, maintenance pool and the icepack/deployment tag of its runs carry it, "
            "its asset keys take it as a key prefix and its jobs, sensors, schedules and resource keys as a "
            "name prefix (the default deployment keeps bare names). Give each icepack deployment of one "
            "Dagster instance its own"
        ),
    ] = None
    catalogs: Annotated[
        dict[str, dict[str, Any]] | None,
        _SECRET,
        _holding_secrets(
            "catalogs",
            catalog_secret_paths,
            dict[str, dict[str, Any]],
            "Catalogs by name, each with its `kind` (embedded, postgres, rest, glue) and fields "
            "(docs/CONFIGURATION.md); secrets as '{{ env.VARIABLE }}'. Default: the embedded catalog `lake`",
        ),
    ] = None
    default_catalog: Annotated[str | None, _described("The catalog meant by 'ns.table'")] = None
    include: Annotated[
        list[str] | None, _described("Table patterns to manage, e.g. 'lake.sales.*' (default: every table)")
    ] = None
    exclude: Annotated[list[str] | None, _described("Table patterns to leave alone")] = None
    home: Annotated[
        str | None, _described("Folder of the embedded catalog, its warehouse and icepack's state")
    ] = None
    state_url: Annotated[
        str | None,
        _SECRET,
        _holding_secrets(
            "state_url",
            state_url_secret_paths,
            str,
            "SQLAlchemy URL of icepack's state database, as '{{ env.VARIABLE }}' when it holds a password; "
            "default SQLite under home",
        ),
    ] = None
    spark: Annotated[
        dict[str, Any] | None,
        _SECRET,
        _described("How maintenance runs Spark (master, driver_memory, conf, jars...)"),
    ] = None
    platform: Annotated[
        dict[str, Any] | None,
        _SECRET,
        _holding_secrets(
            "platform",
            platform_secret_paths,
            dict[str, Any],
            "Schedules, sensor cadences, batch sizes and caps (the `platform` section of "
            "docs/CONFIGURATION.md), e.g. max_maintenance_in_flight, health_sync_cron; alert_webhook_url "
            "as '{{ env.VARIABLE }}'",
        ),
    ] = None
    group: Annotated[
        str | None, _described("Asset group of every icepack asset (default: iceberg_tables and fleet)")
    ] = None
    owners: Annotated[
        list[str] | None,
        _described("Owners of every icepack asset, e.g. 'team:data-platform' (default: team:icepack)"),
    ] = None
    automation: Annotated[
        Literal["running", "stopped"] | None,
        _described(
            "How icepack's sensors and schedules start on an instance that has not run them yet: running, "
            "or stopped until turned on in the UI (default: running)"
        ),
    ] = None

    def settings(self) -> IcepackSettings:
        """icepack's settings: the attributes given, over the environment and the `ICEPACK_CONFIG` file."""
        overrides: dict[str, Any] = {
            field: value
            for field in ("catalogs", "default_catalog", "include", "exclude", "home", "state_url", "spark")
            if (value := getattr(self, field)) is not None
        }
        platform = dict(self.platform or {})
        if self.name is not None:
            platform["deployment_name"] = self.name
        if self.automation is not None:
            platform["sensors_running_by_default"] = self.automation == "running"
        if platform:
            overrides["platform"] = platform
        try:
            return load_settings(**overrides)
        except ConfigurationError as error:
            raise ConfigurationError(
                f"IcepackComponent: {error}\n(fields are the component's attributes in its defs.yaml, with "
                "name as platform.deployment_name and automation as platform.sensors_running_by_default; "
                "those it leaves out come from ICEPACK_* variables and the ICEPACK_CONFIG file)"
            ) from None

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """The deployment's definitions; first, the maintenance pool's limit stored in the instance when
        it has none (`defs/maintenance_pool.py`), so no maintenance run can leave the queue uncapped."""
        settings = self.settings()
        store_at_load(settings.platform)
        defs = build_definitions(settings)
        if self.group is None and self.owners is None:
            return defs
        return defs.map_asset_specs(func=self._presented)

    def _presented(self, spec: dg.AssetSpec) -> dg.AssetSpec:
        changes: dict[str, Any] = {}
        if self.group is not None:
            changes["group_name"] = self.group
        if self.owners is not None:
            changes["owners"] = list(self.owners)
        return spec.replace_attributes(**changes)
