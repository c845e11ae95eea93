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


SecretPath = tuple[str, ...]


def literal(value: Any) -> bool:
    """A value written as it is, not through a template."""
    return isinstance(value, str) and bool(value) and _TEMPLATE not in value


def secret_paths(raw: Any, model: type[BaseModel], path: SecretPath = ()) -> list[SecretPath]:
    """Where the unresolved YAML `raw`, read as `model`, holds a secret: the keys of its `SecretStr`
    fields, in nested models too."""
    if not isinstance(raw, Mapping):
        return []
    found = []
    for key, value in raw.items():
        field = model.model_fields.get(str(key))
        if field is None:
            continue
        types = _types_in(field.annotation)
        if SecretStr in types and value is not None:
            found.append((*path, str(key)))
        for nested in (t for t in types if isinstance(t, type) and issubclass(t, BaseModel)):
            found += secret_paths(value, nested, (*path, str(key)))
    return found


def catalog_secret_paths(raw: Any) -> list[SecretPath]:
    """The secrets of the `catalogs` attribute, each catalog read as the model of its `kind`."""
    kinds = {kind.model_fields["kind"].default: kind for kind in CATALOG_KINDS}
    found = []
    for name, catalog in raw.items() if isinstance(raw, Mapping) else ():
        kind = kinds.get(catalog.get("kind")) if isinstance(catalog, Mapping) else None
        if kind is not None:
            found += secret_paths(catalog, kind, (str(name),))
    return found


def platform_secret_paths(raw: Any) -> list[SecretPath]:
    return secret_paths(raw, PlatformSettings)


def state_url_secret_paths(raw: Any) -> list[SecretPath]:
    """The state database URL is a secret when it is a template or carries a password (`sqlite:///...`
    written as it is carries none)."""
    if isinstance(raw, str) and (not literal(raw) or urlsplit(raw).password):
        return [()]
    return []


def at(value: Any, path: SecretPath) -> Any:
    for key in path:
        value = value[key]
    return value


def refuse_literal_secrets(attribute: str, raw: Any, paths: list[SecretPath]) -> None:
    """Fail naming every secret of `attribute` written as a value rather than a template."""
    literals = [".".join((attribute, *path)) for path in paths if literal(at(raw, path))]
    if literals:
        raise ConfigurationError(
            f"IcepackComponent: {', '.join(literals)}: a secret written as a value in defs.yaml; name an "
            "environment variable instead, e.g. client_secret: \"{{ env.POLARIS_CLIENT_SECRET }}\""
        )
