"""Manifest summaries version 4: deletion vectors (format v3, Puffin) told apart from position delete
files, with the rows they delete, per manifest and per partition. Version 3 summaries counted deletion
vectors as position delete files; they are a cache, so they are dropped and the manifests are decoded
again on first use.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
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
    _summaries(4)
    op.drop_table("icepack_manifest_summaries_v3")


def downgrade() -> None:
    _summaries(3)
    op.drop_table("icepack_manifest_summaries_v4")
