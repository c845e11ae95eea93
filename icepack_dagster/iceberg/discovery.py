"""Discovery: every table in every configured catalog, walked through nested namespaces and filtered by
include/exclude patterns.

A catalog or namespace that cannot be listed is reported as a failure, never dropped and never raised:
callers (the discovery sensor) must know the list is incomplete before they treat a table missing from
it as gone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from pydantic import Field
from pyiceberg.exceptions import NoSuchNamespaceError

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import CatalogSet

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)


class NamespaceFailure(FrozenModel):
    """A catalog (namespace `()`) or namespace whose contents could not be listed."""

    catalog: str = Field(min_length=1)
    namespace: tuple[str, ...] = Field(description="() when the catalog itself failed")
    error: str = Field(min_length=1, description="Exception type and message")


class DiscoveryResult(FrozenModel):
    """Tables found (sorted) and the places that could not be listed."""

    tables: tuple[TableKey, ...]
    failures: tuple[NamespaceFailure, ...] = ()

    @property
    def complete(self) -> bool:
        """True when every catalog and namespace was listed, so a table absent here is really absent."""
        return not self.failures


def matches(key: TableKey, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """Whether a table is managed: some include pattern and no exclude pattern matches
    `catalog.ns.table` or `ns.table` (shell-style, case-sensitive; nested namespaces are dotted)."""
    forms = (key.display(with_catalog=True), key.dotted)
    included = any(fnmatchcase(form, pattern) for pattern in include for form in forms)
    return included and not any(fnmatchcase(form, pattern) for pattern in exclude for form in forms)


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _walk(name: str, catalog: Catalog, keys: list[TableKey], failures: list[NamespaceFailure]) -> None:
    """Depth-first over namespaces; each namespace's tables and children are listed separately, so one
    failing namespace loses only what is inside it."""
    pending: list[tuple[str, ...]] = [()]
    seen: set[tuple[str, ...]] = set()
    while pending:
        parent = pending.pop()
        try:
            children = catalog.list_namespaces(parent)
        except NoSuchNamespaceError:
            continue  # dropped while we walked: nothing of it is left to manage
        except Exception as error:  # any driver or HTTP error: reported, never raised
            failures.append(NamespaceFailure(catalog=name, namespace=parent, error=_describe(error)))
            continue
        for listed in children:
            child = tuple(listed)
            if len(child) > len(parent) and child[: len(parent)] == parent and child not in seen:
                seen.add(child)
                pending.append(child)
        if not parent:
            continue
        try:
            tables = catalog.list_tables(parent)
        except NoSuchNamespaceError:
            continue
        except Exception as error:  # as above
            failures.append(NamespaceFailure(catalog=name, namespace=parent, error=_describe(error)))
            continue
        for identifier in tables:
            keys.append(TableKey(catalog=name, namespace=parent, name=tuple(identifier)[-1]))


def discover_tables(catalogs: CatalogSet, include: list[str], exclude: list[str]) -> DiscoveryResult:
    """All managed tables of all configured catalogs. An empty `include` matches nothing."""
    keys: list[TableKey] = []
    failures: list[NamespaceFailure] = []
    for name in catalogs.names:
        try:
            catalog = catalogs.get(name)
        except Exception as error:  # CatalogUnavailableError and anything a catalog's client raises
            failures.append(NamespaceFailure(catalog=name, namespace=(), error=_describe(error)))
            continue
        _walk(name, catalog, keys, failures)
    failures.sort(key=lambda f: (f.catalog, f.namespace))
    for failure in failures:
        where = ".".join((failure.catalog, *failure.namespace))
        log.warning("discovery: cannot list %s: %s", where, failure.error)
    managed = {key for key in keys if matches(key, include, exclude)}
    return DiscoveryResult(
        tables=tuple(sorted(managed, key=lambda k: (k.catalog, k.namespace, k.name))),
        failures=tuple(failures),
    )
