"""Cluster templates: the kinds of cluster admins offer and their versions, the template
a request asks for and a decision approves, the one a team's vCluster is wanted and was
installed with, and the org's setting that non-admins must choose one.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "cluster_templates",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(40), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("leads_accept", sa.Boolean(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
    )
    op.create_table(
        "template_versions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "template_id", sa.Integer(), sa.ForeignKey("cluster_templates.id"), nullable=False
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
    )
    op.create_index(
        "uq_template_versions_number", "template_versions", ["template_id", "number"], unique=True
    )
    # Plain ALTER TABLE (no batch copy): a copy of these tables would drop the triggers
    # of 0004 and 0012 on SQLite. Hence no foreign key on the template columns either
    # (SQLite alters no constraint, and drops no column under one); versions are never
    # deleted, and the service writes only ids it has just read.
    op.add_column(
        "orgs", sa.Column("require_template", sa.Boolean(), nullable=False, server_default="0")
    )
    for table in ("teams", "cluster_requests", "decisions"):
        op.add_column(
            table,
            sa.Column("template_version_id", sa.Integer(), nullable=True),
        )
        op.add_column(
            table,
            sa.Column("template_parameters", sa.JSON(), nullable=False, server_default="{}"),
        )
    op.add_column(
        "teams",
        sa.Column("template_installed_id", sa.Integer(), nullable=True),
    )
    op.add_column("teams", sa.Column("template_drift", sa.Text(), nullable=True))
    op.add_column("teams", sa.Column("template_checked_at", WHEN, nullable=True))


def downgrade() -> None:
    op.drop_column("teams", "template_checked_at")
    op.drop_column("teams", "template_drift")
    op.drop_column("teams", "template_installed_id")
    for table in ("decisions", "cluster_requests", "teams"):
        op.drop_column(table, "template_parameters")
        op.drop_column(table, "template_version_id")
    op.drop_column("orgs", "require_template")
    op.drop_index("uq_template_versions_number", "template_versions")
    op.drop_table("template_versions")
    op.drop_table("cluster_templates")
