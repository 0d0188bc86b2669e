"""Test data, built through the same services the portal uses."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.core.models import ClusterRequest, Org, User
from app.teams import service


def make_org(session: Session, *, gpus: str = "1", name: str = "ml-org") -> Org:
    org = Org(
        name=name,
        parent_queue=name,
        gpus_centi=round(float(gpus) * 100),
        cpu_millicores=40_000,
        memory_mb=160_000,
    )
    session.add(org)
    session.flush()
    return org


def make_user(session: Session, email: str, *, admin: bool = False) -> User:
    user = User(email=email, display_name=email.split("@")[0], is_admin=admin)
    session.add(user)
    session.flush()
    return user


def request_values(name: str, **overrides: Any) -> dict[str, str]:
    values = {
        "name": name,
        "gpu_quota": "0.33",
        "gpu_limit": "1",
        "over_quota_weight": "1",
        "priority": "100",
        "purpose": f"{name} experiments",
    }
    values.update({k: str(v) for k, v in overrides.items()})
    return values


def submit(session: Session, lead: User, name: str, **overrides: Any) -> ClusterRequest:
    return service.submit_cluster_request(
        session, actor=lead, data=request_values(name, **overrides)
    )
