"""Table keys: the one identity of a table across the CLI, the engine and Dagster partitions, and the
one codec between an identifier, its Dagster partition key and the name the CLI prints and reads.

A key is catalog name + namespace levels + table name. Every text form joins the parts with dots and
percent-encodes, in each part, the few characters that would make the form ambiguous or that Dagster
refuses in a partition key: `.` is `%2E`, `%` is `%25`, `,` is `%2C`, control characters are `%XX` of
their UTF-8 bytes; every other character stands for itself. So a table `Tagged.Table-v2` in namespace
`refs` is `refs.Tagged%2ETable-v2`, and a nested namespace `h.weird` (`h.weird.t`) is never confused
with a namespace `h` holding a table `weird.t` (`h.weird%2Et`). Plain names read as people write them.

- the partition key (`TableKey.text`) always names the catalog: `lake.refs.Tagged%2ETable-v2`;
- the CLI name (`TableKey.cli_name`) leaves the catalog out when there is only one catalog and the
  first namespace level is not itself a catalog's name, which is what `resolve_table_argument` reads.
Decoding is strict: a `%` not followed by two hex digits, or escapes that are not UTF-8, are refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

from pydantic import Field, field_validator

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.exceptions import InvalidTableIdentifierError

# '.', '%' separate or escape; ',' and control characters are refused by Dagster partition keys.
_ESCAPE = re.compile(r"[.%,\x00-\x1f\x7f]")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _encode_part(part: str) -> str:
    return _ESCAPE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode()), part)


class TableKey(FrozenModel):
    """A fully qualified Iceberg table: `catalog`, namespace levels, `name`."""

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
        """The unescaped dotted name that include/exclude and policy patterns match (not reversible)."""
        return f"{self.catalog}.{self.dotted}" if with_catalog else self.dotted

    def cli_name(self, catalog_names: Sequence[str]) -> str:
        """The reversible name the CLI prints: the text form, without the catalog when only one catalog
        is configured and the first namespace level does not read as a catalog's name."""
        if len(catalog_names) > 1 or self.namespace[0] in catalog_names:
            return self.text
        return ".".join(_encode_part(p) for p in self.identifier)

    def __str__(self) -> str:
        return self.text


def parse_table_key(text: str) -> TableKey:
    """Parse the text form `catalog.ns[.ns...].table` (see `TableKey.text`)."""
    parts = text.split(".")
    if len(parts) < 3 or any(p == "" for p in parts):
        raise InvalidTableIdentifierError(
            f"{text!r} is not a table key: expected 'catalog.namespace.table' (nested namespaces allowed)"
        )
    decoded = _decode_parts(text, parts)
    return TableKey(catalog=decoded[0], namespace=tuple(decoded[1:-1]), name=decoded[-1])


def _decode_parts(text: str, parts: list[str]) -> list[str]:
    """Each part with its %XX escapes decoded, strictly (see the module docstring)."""
    try:
        if any(_BAD_ESCAPE.search(p) for p in parts):
            raise ValueError("a '%' must start an escape such as %2E (a dot) or %25 (a percent sign)")
        return [unquote(p, errors="strict") for p in parts]
    except (ValueError, UnicodeDecodeError) as error:
        reason = error.reason if isinstance(error, UnicodeDecodeError) else str(error)
        raise InvalidTableIdentifierError(f"{text!r} is not a table name: {reason}") from None


def resolve_table_argument(text: str, catalog_names: list[str], default_catalog: str) -> TableKey:
    """Read a table as a person types it, or as the CLI printed it (`TableKey.cli_name`): `ns.table`,
    `ns1.ns2.table`, or `catalog.ns.table`.

    A leading part that names a configured catalog, followed by at least two more, selects that catalog;
    otherwise the default catalog is meant. Parts escape dots as `%2E` and percent signs as `%25`.
    """
    raw = text.split(".")
    if any(p == "" for p in raw) or len(raw) < 2:
        raise InvalidTableIdentifierError(
            f"{text!r} is not a table identifier: write 'namespace.table' or 'catalog.namespace.table'"
        )
    parts = _decode_parts(text, raw)
    if len(parts) >= 3 and parts[0] in catalog_names:
        return TableKey(catalog=parts[0], namespace=tuple(parts[1:-1]), name=parts[-1])
    return TableKey(catalog=default_catalog, namespace=tuple(parts[:-1]), name=parts[-1])
