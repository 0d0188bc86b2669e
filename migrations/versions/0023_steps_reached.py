"""Each provisioning step remembers that it was once in place (``reached``): the team
page's progress counts those, so it never runs backwards while a step is retried or
re-applied.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 09:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "provisioning_steps",
        sa.Column("reached", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    steps = sa.table(
        "provisioning_steps", sa.column("status", sa.String), sa.column("reached", sa.Boolean)
    )
    op.execute(steps.update().where(steps.c.status.in_(["done", "removed"])).values(reached=True))


def downgrade() -> None:
    with op.batch_alter_table("provisioning_steps", recreate="never") as batch:
        batch.drop_column("reached")
