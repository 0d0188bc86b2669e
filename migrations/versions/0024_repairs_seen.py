"""The drift repairs an admin has acknowledged: the overview lists only those after
``orgs.repairs_seen_id`` (the newest repair's audit id when it was acknowledged).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 09:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "orgs", sa.Column("repairs_seen_id", sa.Integer(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    with op.batch_alter_table("orgs", recreate="never") as batch:
        batch.drop_column("repairs_seen_id")
