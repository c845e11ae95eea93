"""Whether a REST catalog's table changed, asked with a conditional loadTable.

A REST catalog lists no metadata files, so a health sync asks each table. The Iceberg REST spec lets the
client send the `ETag` of its last answer as `If-None-Match`; a server that keeps it answers
`304 Not Modified` with no body while the table is the same, and the table is neither transferred nor
parsed. Iceberg's own REST server sends ETags from 1.11.0 (a hash of the metadata location), as does
Polaris; a server that sends none is detected from its first answer, and its tables are loaded with
PyIceberg's `load_table` as before.

PyIceberg 0.12 (pinned) does not send `If-None-Match`; the request goes through the catalog's own
session (its auth manager and OAuth2 token refresh, SigV4, TLS settings), its URL building and its
response handling, the same calls `RestCatalog.load_table` makes, so only headers are added: the ETag,
and `Accept-Encoding: identity`. Catalogs compute their ETag from the table (Iceberg's: a hash of the
metadata location) and compare `If-None-Match` with it; a compression layer in front that marks the
ETag of a compressed answer (Jetty 12's `CompressionHandler`, in Iceberg's REST server 1.11.0, sends
`<etag>--gzip`) and does not undo it on the request would never see a match. Only changed tables are
transferred, so their metadata travels uncompressed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast

from icepack_dagster.exceptions import MetadataReadError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.table import Table

NOT_MODIFIED = 304


class ConditionalLoad(NamedTuple):
    """What a load found: the table (None when the server said it is unchanged since the ETag sent)
    and the ETag of this answer (None when the server sends none)."""

    table: Table | None
    etag: str | None


class ConditionalLoads:
    """Conditional loadTable requests to one REST catalog, while its server answers with ETags."""

    def __init__(self, catalog: RestCatalog) -> None:
        self.catalog = catalog
        self.server_sends_etags: bool | None = None  # learnt from the first answer

    def load(self, identifier: tuple[str, ...], etag: str | None) -> ConditionalLoad:
        """The table, or `ConditionalLoad(None, etag)` when the server answers 304 to `etag`. PyIceberg's
        exceptions pass through as from `load_table` (a missing table is `NoSuchTableError`)."""
        if self.server_sends_etags is False:
            return ConditionalLoad(self.catalog.load_table(identifier), None)
        from pyiceberg.catalog.rest import _RETRY_ARGS
        from tenacity import retry

        # PyIceberg's retry of an expired token: it refreshes the token of its first argument, the catalog
        answer = retry(**cast(dict[str, Any], _RETRY_ARGS))(_conditional_load)(self.catalog, identifier, etag)
        if answer.table is not None:
            self.server_sends_etags = answer.etag is not None
        return answer


def rest_catalog_of(catalog: Catalog) -> RestCatalog | None:
    """The catalog as PyIceberg's `RestCatalog`, or None for another kind."""
    from pyiceberg.catalog.rest import RestCatalog

    return catalog if isinstance(catalog, RestCatalog) else None


def _conditional_load(catalog: RestCatalog, identifier: tuple[str, ...], etag: str | None) -> ConditionalLoad:
    """One loadTable request, as `RestCatalog.load_table` sends it, with `If-None-Match: etag`."""
    from pyiceberg.catalog.rest import SNAPSHOT_LOADING_MODE, Capability, Endpoints, TableResponse
    from pyiceberg.catalog.rest.response import _handle_non_200_response
    from pyiceberg.exceptions import NoSuchTableError
    from requests import HTTPError

    catalog._check_endpoint(Capability.V1_LOAD_TABLE)
    params = {}
    if mode := catalog.properties.get(SNAPSHOT_LOADING_MODE):
        if mode not in {"all", "refs"}:
            raise ValueError(f"Invalid snapshot-loading-mode: {mode}")
        params["snapshots"] = mode
    path = catalog._split_identifier_for_path(identifier)
    headers = {"Accept-Encoding": "identity"} | ({"If-None-Match": etag} if etag is not None else {})
    response = catalog._session.get(
        catalog.url(Endpoints.load_table, prefixed=True, **path), params=params, headers=headers
    )
    if response.status_code == NOT_MODIFIED:
        if etag is None:  # only an answer to If-None-Match may be 304
            raise MetadataReadError(
                f"table {'.'.join(identifier)}: the REST catalog answered 304 to a load without "
                "If-None-Match; check the catalog (or a proxy before it) caches correctly"
            )
        return ConditionalLoad(None, etag)
    try:
        response.raise_for_status()
    except HTTPError as error:
        _handle_non_200_response(error, {404: NoSuchTableError})
    table_response = TableResponse.model_validate_json(response.text)
    table = catalog._response_to_table(catalog.identifier_to_tuple(identifier), table_response)
    return ConditionalLoad(table, response.headers.get("ETag"))
