"""One open request per team, enforced by a partial unique index.

Duplicates that concurrent submissions left behind are cancelled first (the oldest open
request of each team stays open).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 04:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

OPEN = "status = 'submitted'"


def upgrade() -> None:
    op.execute(
        "UPDATE cluster_requests SET status = 'cancelled' WHERE status = 'submitted' AND id NOT IN "
        "(SELECT MIN(id) FROM cluster_requests WHERE status = 'submitted' GROUP BY team_id)"
    )
    with op.batch_alter_table("cluster_requests") as batch_op:
        batch_op.create_index(
            "uq_cluster_requests_open",
            ["team_id"],
            unique=True,
            sqlite_where=sa.text(OPEN),
            postgresql_where=sa.text(OPEN),
        )


def downgrade() -> None:
    with op.batch_alter_table("cluster_requests") as batch_op:
        batch_op.drop_index(
            "uq_cluster_requests_open", sqlite_where=sa.text(OPEN), postgresql_where=sa.text(OPEN)
        )
