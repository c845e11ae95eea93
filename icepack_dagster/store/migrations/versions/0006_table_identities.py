"""Table identities: the Iceberg UUID of the table last measured under each name, so that a table
dropped and created again under its name starts with a history of its own (store/table_identities.py).

The record starts empty: every name is recorded as it is when first measured after the upgrade, and
nothing is set aside for it.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "icepack_table_identities",
        sa.Column("table_key", sa.String(1024), primary_key=True),
        sa.Column("table_uuid", sa.String(64), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("icepack_table_identities")
