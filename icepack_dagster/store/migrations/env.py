"""Alembic's entry point: runs the revisions on the connection schema_migrations hands over, inside that
connection's transaction (which holds the migration lock), with icepack's own version table."""

from alembic import context

from icepack_dagster.store.schema_migrations import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
