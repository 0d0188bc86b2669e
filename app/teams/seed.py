"""The design source's example: org `ml-org` with one GPU and three teams at 0.33 each."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth import repository as users
from app.core.events import Event
from app.core.models import Org, User
from app.teams import repository as repo
from app.teams import service
from app.teams.rules import QuotaValues

EXAMPLE_TEAMS = (
    ("nlp", "Own CRDs for NLP workloads"),
    ("vision", "cluster-admin to debug scheduling"),
    ("recommender", "A different Kubeflow version"),
)


def seed_example(session: Session) -> bool:
    """Create the example org, users and teams unless an org exists; True if it seeded."""
    if repo.has_org(session):
        return False
    org = Org(
        name="ml-org",
        parent_queue="ml-org",
        gpus_centi=100,
        cpu_millicores=40_000,
        memory_mb=160_000,
    )
    admin = User(email="admin@example.org", display_name="Platform admin", is_admin=True)
    session.add_all([org, admin])
    session.flush()
    audit.record(
        session, actor=None, event=Event.POOL_CREATED, summary="example pool ml-org: 1 GPU"
    )
    for name, purpose in EXAMPLE_TEAMS:
        lead = users.get_user_by_email(session, f"lead-{name}@example.org")
        if lead is None:
            lead = User(email=f"lead-{name}@example.org", display_name=f"{name.title()} lead")
            session.add(lead)
            session.flush()
        request = service.submit_cluster_request(
            session,
            actor=lead,
            name=name,
            # The design source's queues: 0.33 GPU guaranteed, limit 1, weight 1, priority 100.
            values=QuotaValues(gpu_quota_centi=33, gpu_limit_centi=100),
            purpose=purpose,
        )
        service.approve(session, actor=admin, request_id=request.id)
    return True
