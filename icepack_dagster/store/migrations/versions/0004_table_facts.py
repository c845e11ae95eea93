"""Table facts: each table's latest status, health, needs_operator verdict and maintenance outcome, per
icepack deployment (several may share the database), which the sensors, the checks and the fleet summary
read instead of Dagster's event log; and the counter that numbers each health written.

The facts start empty: the first health sync after the upgrade writes every table it syncs once (as a
first sync does), and the maintenance sensor starts reading from there.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "icepack_table_facts",
        sa.Column("deployment", sa.String(40), primary_key=True),
        sa.Column("table_key", sa.String(1024), primary_key=True),
        sa.Column("status", sa.Text),
        sa.Column("status_error", sa.Text),
        sa.Column("health", sa.Text),
        sa.Column("operator_verdict", sa.String(32)),
        sa.Column("health_event", sa.BigInteger),
        sa.Column("measured_at", sa.DateTime(timezone=True)),
        sa.Column("maintained_at", sa.DateTime(timezone=True)),
        sa.Column("outcome", sa.String(32)),
        sa.Column("files_reclaimed", sa.BigInteger, nullable=False),
        sa.Column("bytes_reclaimed", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_icepack_table_facts_deployment_health_event",
        "icepack_table_facts",
        ["deployment", "health_event"],
    )
    counter = op.create_table(
        "icepack_fact_counter",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("last_health_event", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(counter, [{"id": 1, "last_health_event": 0}])


def downgrade() -> None:
    op.drop_table("icepack_fact_counter")
    op.drop_table("icepack_table_facts")
