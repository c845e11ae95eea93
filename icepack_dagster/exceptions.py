"""Project exceptions. Adapters translate PyIceberg, Spark and database errors into these at the boundary,
so every message names the table (or setting) and says what to do next."""

from __future__ import annotations

_SHOWN_VALUE_CHARS = 120


def _shown(value: object) -> str:
    """A value as an error message quotes it: bounded, so a 100 KB property never makes a 100 KB error."""
    text = repr(value)
    if len(text) <= _SHOWN_VALUE_CHARS:
        return text
    return f"{text[:_SHOWN_VALUE_CHARS]}... ({len(text)} characters)"


class IcepackError(Exception):
    """Base class: every error icepack_dagster raises on purpose."""


class ConfigurationError(IcepackError):
    """A setting is missing, half-configured or invalid; raised at start-up, or when a Spark session
    first applies it, naming the field."""


class MissingComponentError(IcepackError):
    """A required runtime part (Java, a jar, a database driver) is not installed; says what to install."""


class WebhookDeliveryError(IcepackError):
    """The alert webhook could not be reached or refused the message; the message never quotes the
    webhook's URL (it carries a token), and the alert is sent again at the next sensor tick."""


class CatalogUnavailableError(IcepackError):
    """The catalog (or the table's storage) could not be reached, opened or listed; nothing was changed
    because of it, and it is never counted as the table's failure. `transient`: it kept failing the way
    an unreachable or restarting service does (maintenance is deferred); otherwise it refused us (bad
    credentials, a missing database: maintenance fails, unrecorded, until the settings are fixed)."""

    def __init__(self, message: str, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


class SparkConnectUnavailableError(IcepackError):
    """The Spark Connect server of an `sc://` master did not answer; names the endpoint and what to check."""


class TableNotFoundError(IcepackError):
    """The table does not exist (any more) in its catalog."""


class InvalidTableIdentifierError(IcepackError):
    """A table identifier or partition key cannot be parsed into catalog, namespace and table."""


class InvalidPolicyError(IcepackError):
    """A policy value (from the policy file or an `icepack.` table property) is invalid for one table."""

    def __init__(self, table: str, field: str, value: object, reason: str) -> None:
        self.table = table
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"table {table}: invalid policy value for {field!r} ({_shown(value)}): {reason}")


class InvalidProcedureOptionError(InvalidPolicyError, ValueError):
    """A maintenance option is not allowlisted for its action or its value does not validate."""

    def __init__(self, table: str, option: str, value: object, reason: str) -> None:
        super().__init__(table, option, value, reason)
        self.args = (f"table {table}: maintenance option {option!r} ({_shown(value)}) refused: {reason}",)


class RejectedSparkOverrideError(IcepackError):
    """An `icepack.spark.sql.*` table property is not allowlisted or its value does not validate."""

    def __init__(self, table: str, key: str, reason: str) -> None:
        self.table = table
        self.key = key
        self.reason = reason
        property_name = "icepack." + key if key.startswith("spark.sql.") else key
        super().__init__(f"table {table}: Spark SQL override property {property_name!r} refused: {reason}")


class MetadataReadError(IcepackError):
    """The table's Iceberg metadata (metadata file, manifest list or manifest) could not be read."""


class TableLeaseHeldError(IcepackError):
    """Another maintenance (from the CLI or the platform) holds the table's lease; nothing was run."""


class InternalError(IcepackError):
    """An error only a bug raises (in icepack or a library it calls), not a fault of the table; the
    message says so and names the table, and the traceback is logged."""


class MaintenanceError(IcepackError):
    """A maintenance action failed on Spark; the message names the table and the action."""


class UnsafeMaintenanceError(IcepackError):
    """A safety guard refused a destructive action (for example orphan removal below the 24-hour floor)."""
