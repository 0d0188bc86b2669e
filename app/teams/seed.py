"""The design source's example: org `ml-org` with one GPU and three teams at 0.33 each,
each with the kind of cluster it wants (a cluster template)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from app.audit import service as audit
from app.auth import repository as users
from app.catalog import service as catalog
from app.catalog.schema import ValuesSchema
from app.core.events import Event
from app.core.models import Org, Pool, QuotaGrant, Sleep, User, utcnow
from app.core.quota import Quota
from app.teams import grants, service
from app.teams import repository as repo

EXAMPLE_TEAMS: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("nlp", "Own CRDs for NLP workloads", "crd-playground", {}),
    ("vision", "cluster-admin to debug scheduling", "bare", {}),
    ("recommender", "A different Kubeflow version", "kubeflow-training", {"version": "v1.7.0"}),
)

_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  names: {{kind: {kind}, plural: {plural}, singular: {singular}}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""

# The design source's three kinds of cluster, as templates of the example org.
EXAMPLE_TEMPLATES: tuple[tuple[str, str, bool, dict[str, object]], ...] = (
    ("bare", "A plain vCluster: nothing installed inside.", True, {}),
    (
        "crd-playground",
        "A namespace to experiment in and an example CRD, put back if deleted.",
        False,
        {
            "manifests": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: playground\n"
            "---\n"
            + _CRD.format(
                plural="experiments",
                singular="experiment",
                kind="Experiment",
                group="nlp.example.org",
            ),
            "repair_drift": True,
        },
    ),
    (
        "kubeflow-training",
        "The Kubeflow Training Operator's namespace and PyTorchJob CRD, at a version the "
        "team chooses.",
        False,
        {
            "manifests": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kubeflow\n"
            "  labels: {training-operator.kubeflow.org/version: ${version}}\n"
            "---\n"
            + _CRD.format(
                plural="pytorchjobs", singular="pytorchjob", kind="PyTorchJob", group="kubeflow.org"
            ),
            "parameters": [
                {
                    "name": "version",
                    "label": "Training Operator version",
                    "type": "choice",
                    "allowed": ["v1.8.1", "v1.7.0"],
                    "default": "v1.8.1",
                }
            ],
            # Training wants the default pool; a little of the L40S pool for evaluation.
            "default_quota": {
                "gpu_quota": "0.33",
                "gpu_limit": "1",
                "pools.l40s.gpu_quota": "0.25",
                "pools.l40s.gpu_limit": "1",
            },
        },
    ),
)


def seed_example(session: Session) -> bool:
    """Create the example org, users and teams unless an org exists; True if it seeded."""
    if repo.has_org(session):
        return False
    org = Org.with_pool("ml-org", {"gpu": 100, "cpu": 40_000, "memory": 160_000})
    org.default_pool.gpu_type = "NVIDIA H100"
    # A second GPU type in a pool of its own (the simulated cluster's "l40s" nodes): its
    # budget, 2 of its 4 GPUs, is what teams may be guaranteed there.
    l40s = Pool(name="l40s", label_value="l40s", gpu_type="NVIDIA L40S", price_centi=120)
    l40s.set_capacity({"gpu": 200})
    org.pools.append(l40s)
    admin = User(email="admin@example.org", display_name="Platform admin", is_admin=True)
    session.add_all([org, admin])
    session.flush()
    audit.record(
        session, actor=None, event=Event.POOL_CREATED, summary="example pool ml-org: 1 GPU"
    )
    templates = {}
    for template_name, description, default, spec in EXAMPLE_TEMPLATES:
        version = catalog.create_template(
            session,
            actor=admin,
            name=template_name,
            description=description,
            raw_spec=spec,
            schema=ValuesSchema(None, "the example", "no vCluster values"),
            is_default=default,
        )
        templates[template_name] = version.template_id
    for name, purpose, template_name, parameters in EXAMPLE_TEAMS:
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
            values=Quota.of_gpu(33, 100),
            purpose=purpose,
            template=catalog.choose(
                session,
                template_id=templates[template_name],
                parameters=parameters,
                org=org,
                admin=False,
            ),
        )
        service.approve(session, actor=admin, request_id=request.id)
    return True


def seed_sleep(session: Session) -> bool:
    """The demo's sleep policy (idle clusters sleep after 8 hours) and a team asleep
    already: the reconciler installs recommender's vCluster, then pauses it, so a
    newcomer sees one asleep."""
    org = repo.get_org(session)
    recommender = repo.get_live_team_by_name(session, "recommender")
    if recommender is None:
        return False
    org.sleep_after_hours = 8
    recommender.sleep = Sleep.FALLING_ASLEEP
    recommender.sleep_reason = "nothing ran in it and nobody used it for 8 hours"
    recommender.next_attempt_at = utcnow()
    return True


def seed_pool_use(session: Session) -> bool:
    """The demo's vision team also holds 1 GPU (limit 2) of the L40S pool, set as an
    admin's approval would: its queue there is made by the reconciler."""
    org = repo.get_org(session)
    vision = repo.get_live_team_by_name(session, "vision")
    l40s = next((p for p in repo.get_pools(session, org.id) if p.name == "l40s"), None)
    if vision is None or l40s is None:
        return False
    vision.set_quota(l40s, Quota.of_gpu(100, 200))
    vision.desired_generation += 1
    vision.next_attempt_at = utcnow()
    audit.record(
        session,
        actor=None,
        event=Event.POOL_UPDATED,
        summary="example: team vision holds 1 GPU (limit 2) in pool l40s",
    )
    return True


def seed_grant(session: Session) -> bool:
    """The demo's temporary grant: vision holds 0.5 GPU more in the L40S pool for three
    days (a fine-tuning run), asked by its lead and approved, so it runs from the start."""
    vision = repo.get_live_team_by_name(session, "vision")
    admin = users.get_user_by_email(session, "admin@example.org")
    lead = users.get_user_by_email(session, "lead-vision@example.org")
    if vision is None or admin is None or lead is None:
        return False
    now = utcnow()
    l40s = next((p for p in vision.quota_by_pool() if p.name == "l40s"), None)
    if l40s is None:
        return False
    # Written as its lead's ask would be (the team is not ready yet: a lead could not).
    grant = QuotaGrant(
        team_id=vision.id,
        pool_id=l40s.id,
        gpu_centi=50,
        limit_centi=50,
        starts_at=now,
        ends_at=now + timedelta(days=3),
        reason="a three-day fine-tuning run",
        requested_by_id=lead.id,
        created_at=now,
        decision_reason="",
    )
    session.add(grant)
    session.flush()
    grants.approve(session, actor=admin, grant_id=grant.id, now=now)
    return True
