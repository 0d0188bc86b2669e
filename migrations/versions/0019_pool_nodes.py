"""A node pool's nodes and money: the node label's value that selects its nodes (the
default pool: none, the nodes without the label), the GPU type people read, and an
optional price per GPU-hour. Existing pools are the default pools: their label value
is empty; nothing a user sees changes.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 23:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Columns added in place (no table copy: other tables' keys point at pools); the
    # price's check goes with its column, which SQLite accepts on ADD COLUMN.
    op.add_column(
        "pools", sa.Column("label_value", sa.String(length=63), nullable=False, server_default="")
    )
    op.add_column(
        "pools", sa.Column("gpu_type", sa.String(length=100), nullable=False, server_default="")
    )
    op.add_column(
        "pools",
        sa.Column(
            "price_centi",
            sa.Integer(),
            sa.CheckConstraint("price_centi >= 0", name=op.f("ck_pools_price_not_negative")),
            nullable=True,
        ),
    )
    op.create_index("uq_pools_org_id_label_value", "pools", ["org_id", "label_value"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_pools_org_id_label_value", table_name="pools")
    with op.batch_alter_table("pools", recreate="never") as batch:
        batch.drop_column("price_centi")
        batch.drop_column("gpu_type")
        batch.drop_column("label_value")
