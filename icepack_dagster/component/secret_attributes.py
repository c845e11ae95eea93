"""Which attributes of `IcepackComponent` hold a secret, and the rule for them: a `defs.yaml` is kept in
the project's repository, so a secret in it is the name of an environment variable written through
Dagster's template (`"{{ env.POLARIS_CLIENT_SECRET }}"`), never a value.

The secrets are the settings' own `SecretStr` fields (a catalog's client secret or password, its S3
secret key, the alert webhook URL) found by walking the settings models, so a new catalog kind's secret
is covered without a line here; and the state database URL when it carries a password.
"""

from collections.abc import Mapping
from types import UnionType
from typing import Any, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

from icepack_dagster.config.catalogs import CATALOG_KINDS
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.exceptions import ConfigurationError

_TEMPLATE = "{{"


def _types_in(annotation: Any) -> list[Any]:
    """`annotation` and the types inside it (`SecretStr | None` -> SecretStr, None)."""
    if get_origin(annotation) in (Union, UnionType) or get_args(annotation):
        return [found for arg in get_args(annotation) for found in _types_in(arg)]
    return [annotation]


def _literal(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and _TEMPLATE not in value


def literal_secrets(raw: Any, model: type[BaseModel], path: str) -> list[str]:
    """The paths under `path` of the unresolved YAML `raw` (read as `model`) where a secret is written as
    a value instead of a template."""
    if not isinstance(raw, Mapping):
        return []
    found = []
    for key, value in raw.items():
        field = model.model_fields.get(str(key))
        if field is None:
            continue
        types = _types_in(field.annotation)
        if SecretStr in types and _literal(value):
            found.append(f"{path}.{key}")
        for nested in (t for t in types if isinstance(t, type) and issubclass(t, BaseModel)):
            found += literal_secrets(value, nested, f"{path}.{key}")
    return found


def catalog_literal_secrets(raw: Any) -> list[str]:
    """Literal secrets in the `catalogs` attribute, each catalog read as the model of its `kind`."""
    kinds = {kind.model_fields["kind"].default: kind for kind in CATALOG_KINDS}
    found = []
    for name, catalog in (raw or {}).items() if isinstance(raw, Mapping) else ():
        kind = kinds.get(catalog.get("kind")) if isinstance(catalog, Mapping) else None
        if kind is not None:
            found += literal_secrets(catalog, kind, f"catalogs.{name}")
    return found


def platform_literal_secrets(raw: Any) -> list[str]:
    return literal_secrets(raw, PlatformSettings, "platform")


def state_url_literal_secrets(raw: Any) -> list[str]:
    """The state database URL is a secret only when it carries a password (`sqlite:///...` is not)."""
    if _literal(raw) and urlsplit(raw).password:
        return ["state_url"]
    return []


def refuse_literal_secrets(paths: list[str]) -> None:
    if paths:
        raise ConfigurationError(
            f"IcepackComponent: {', '.join(paths)} hold a secret as a value in defs.yaml; name an "
            "environment variable instead, e.g. client_secret: \"{{ env.POLARIS_CLIENT_SECRET }}\""
        )
