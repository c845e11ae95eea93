"""What tests read of the test PostgreSQL server itself."""

from __future__ import annotations

from tests.conftest import _admin_connection


def jdbc_connections(database: str) -> int:
    """Connections Spark's JDBC driver holds to `database` (PyIceberg's have another application name)."""
    admin = _admin_connection()
    try:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND application_name = 'PostgreSQL JDBC Driver'",
                (database,),
            )
            (count,) = cursor.fetchone()
    finally:
        admin.close()
    return int(count)
