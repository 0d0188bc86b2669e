"""The org view as the pages read it: every team's quota row and share, from the
usage cache (kept ready by the view refresher), for one org."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.models import (
    Org,
)
from app.usage import repository as usage_repo
from app.usage.service import OrgView, UsageCache


def org_view(session: Session, usage: UsageCache, org: Org) -> OrgView:
    return usage.org_view(
        lambda: usage_repo.get_quota_rows(session, org.id),
        pool_centi=org.gpus_centi,
        parent=org.parent_queue,
    )
