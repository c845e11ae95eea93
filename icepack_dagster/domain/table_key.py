"""Table keys: the one identity of a table across the CLI, the engine and Dagster partitions.

A key is catalog name + namespace levels + table name. Its text form (also the Dagster partition key)
joins the parts with dots and percent-encodes the few characters that would make the form ambiguous
or that Dagster refuses in a partition key, so `parse(key.text) == key` for every key.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from icepack_dagster.exceptions import InvalidTableIdentifierError

# '.', '%' separate or escape; ',' and control characters are refused by Dagster partition keys.
_ESCAPE = re.compile(r"[.%,\x00-\x1f\x7f]")


def _encode_part(part: str) -> str:
    return _ESCAPE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode()), part)


class TableKey(BaseModel):
    """A fully qualified Iceberg table: `catalog`, namespace levels, `name`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: str = Field(min_length=1)
    namespace: tuple[str, ...] = Field(min_length=1)
    name: str = Field(min_length=1)

    @field_validator("namespace")
    @classmethod
    def _levels_not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(level == "" for level in value):
            raise ValueError("namespace levels must not be empty")
        return value

    @property
    def identifier(self) -> tuple[str, ...]:
        """The identifier inside its catalog, as PyIceberg takes it: (*namespace, name)."""
        return (*self.namespace, self.name)

    @property
    def dotted(self) -> str:
        """`namespace.table` as people write it (not escaped; for display)."""
        return ".".join(self.identifier)

    @property
    def text(self) -> str:
        """The reversible text form `catalog.ns[.ns...].table`; also the Dagster partition key."""
        return ".".join(_encode_part(p) for p in (self.catalog, *self.namespace, self.name))

    def display(self, with_catalog: bool) -> str:
        """How the CLI names the table: with the catalog prefix only when several catalogs exist."""
        return f"{self.catalog}.{self.dotted}" if with_catalog else self.dotted

    def __str__(self) -> str:
        return self.text


def parse_table_key(text: str) -> TableKey:
    """Parse the text form `catalog.ns[.ns...].table` (see `TableKey.text`)."""
    parts = text.split(".")
    if len(parts) < 3 or any(p == "" for p in parts):
        raise InvalidTableIdentifierError(
            f"{text!r} is not a table key: expected 'catalog.namespace.table' (nested namespaces allowed)"
        )
    decoded = [unquote(p) for p in parts]
    return TableKey(catalog=decoded[0], namespace=tuple(decoded[1:-1]), name=decoded[-1])


def resolve_table_argument(text: str, catalog_names: list[str], default_catalog: str) -> TableKey:
    """Read a table as a person types it: `ns.table`, `ns1.ns2.table`, or `catalog.ns.table`.

    A leading part that names a configured catalog selects that catalog; otherwise the default catalog
    is meant. Parts may contain escaped dots (`%2E`) for names that contain a dot.
    """
    parts = [unquote(p) for p in text.split(".")]
    if any(p == "" for p in parts) or len(parts) < 2:
        raise InvalidTableIdentifierError(
            f"{text!r} is not a table identifier: write 'namespace.table' or 'catalog.namespace.table'"
        )
    if len(parts) >= 3 and parts[0] in catalog_names:
        return TableKey(catalog=parts[0], namespace=tuple(parts[1:-1]), name=parts[-1])
    return TableKey(catalog=default_catalog, namespace=tuple(parts[:-1]), name=parts[-1])
