"""Table leases, action predictions and manifest summaries version 2; the hand-made schema version
table and the version 1 summaries go.

icepack releases between the baseline and this revision created these tables on first use (and kept
their version in `icepack_schema_version`), so each is created only where it is missing. Version 1
manifest summaries are a cache nothing reads any more (summaries are keyed by their format version):
they are dropped rather than left to grow. Alembic's version table replaces `icepack_schema_version`.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _has(name: str) -> bool:
    return sa.inspect(op.get_bind()).has_table(name)


def upgrade() -> None:
    if not _has("icepack_action_predictions"):
        op.create_table(
            "icepack_action_predictions",
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("table_key", sa.String(1024), nullable=False, index=True),
            sa.Column("action", sa.String(64), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("snapshot_id", sa.BigInteger),
            sa.Column("exact", sa.Boolean, nullable=False),
            sa.Column("planned_files_in", sa.BigInteger, nullable=False),
            sa.Column("planned_files_out", sa.BigInteger),
            sa.Column("planned_bytes_in", sa.BigInteger),
            sa.Column("done_files_in", sa.BigInteger),
            sa.Column("done_files_out", sa.BigInteger),
            sa.Column("done_bytes_in", sa.BigInteger),
        )
    if not _has("icepack_table_leases"):
        op.create_table(
            "icepack_table_leases",
            sa.Column("table_key", sa.String(1024), primary_key=True),
            sa.Column("holder", sa.String(512), nullable=False),
            sa.Column("token", sa.String(64), nullable=False),
            sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        )
    if not _has("icepack_manifest_summaries_v2"):
        op.create_table(
            "icepack_manifest_summaries_v2",
            sa.Column("path", sa.Text, primary_key=True),
            sa.Column("small_threshold", sa.BigInteger, primary_key=True),
            sa.Column("summary", sa.Text, nullable=False),
            sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False, index=True),
        )
    if _has("icepack_manifest_summaries_v1"):
        op.drop_table("icepack_manifest_summaries_v1")
    if _has("icepack_schema_version"):
        op.drop_table("icepack_schema_version")


def downgrade() -> None:
    op.create_table(
        "icepack_manifest_summaries_v1",
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("small_threshold", sa.BigInteger, primary_key=True),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )
    op.drop_table("icepack_manifest_summaries_v2")
    op.drop_table("icepack_table_leases")
    op.drop_table("icepack_action_predictions")
