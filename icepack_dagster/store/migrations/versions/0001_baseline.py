"""Baseline: the schema icepack kept before its state database had migrations (maintenance history and
manifest summaries, version 1).

That icepack created each store's tables on first use, so a database it wrote may hold only some of
them: each table is created only where it is missing, which makes this revision the baseline stamp for
such a database and the first step for a new one.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _missing(name: str) -> bool:
    return not sa.inspect(op.get_bind()).has_table(name)


def upgrade() -> None:
    if _missing("icepack_maintenance_runs"):
        op.create_table(
            "icepack_maintenance_runs",
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("table_key", sa.String(1024), nullable=False, index=True),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("outcome", sa.String(32), nullable=False),
            sa.Column("error", sa.Text),
            sa.Column("report", sa.Text),
        )
    if _missing("icepack_action_runs"):
        op.create_table(
            "icepack_action_runs",
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("table_key", sa.String(1024), nullable=False, index=True),
            sa.Column("action", sa.String(64), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        )
    if _missing("icepack_manifest_summaries_v1"):
        op.create_table(
            "icepack_manifest_summaries_v1",
            sa.Column("path", sa.Text, primary_key=True),
            sa.Column("small_threshold", sa.BigInteger, primary_key=True),
            sa.Column("summary", sa.Text, nullable=False),
            sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False, index=True),
        )


def downgrade() -> None:
    op.drop_table("icepack_manifest_summaries_v1")
    op.drop_table("icepack_action_runs")
    op.drop_table("icepack_maintenance_runs")
