"""Manifest summaries version 3: each partition's position delete files and their bytes, which the
position-delete planner reads. Version 2 summaries lack them; they are a cache, so they are dropped and
the manifests are decoded again on first use.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _summaries(version: int) -> None:
    op.create_table(
        f"icepack_manifest_summaries_v{version}",
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("small_threshold", sa.BigInteger, primary_key=True),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )


def upgrade() -> None:
    _summaries(3)
    op.drop_table("icepack_manifest_summaries_v2")


def downgrade() -> None:
    _summaries(2)
    op.drop_table("icepack_manifest_summaries_v3")
