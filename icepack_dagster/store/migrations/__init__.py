"""Alembic migrations of icepack's state database, applied by `icepack state upgrade` and at start-up
(state/schema_migrations.py). One revision per schema change; a revision never changes once released."""
