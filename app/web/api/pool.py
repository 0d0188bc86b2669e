"""API: the org's GPU pool."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy.orm import Session

from app.core import quota
from app.core.errors import InvalidInput
from app.core.models import Org
from app.core.quantities import format_hundredths, parse_hundredths
from app.provisioning import sleep
from app.runtime import Portal
from app.teams import pools, service
from app.teams import repository as repo
from app.web.deps import AdminPrincipal, CurrentPrincipal, Id, PortalDep, SessionDep, UsageDep
from app.web.paging import PAGED, WindowDep, announce
from app.web.schemas import (
    PROBLEMS,
    Amount,
    ImpactOut,
    NodePoolChangeIn,
    NodePoolIn,
    NodePoolOut,
    NodesOut,
    PoolIn,
    PoolOut,
    SleepPolicyIn,
    SleepPolicyOut,
)
from app.web.views.api import impact_out
from app.web.views.impact import org_impact

router = APIRouter(prefix="/api/v1", responses=PROBLEMS, tags=["pool"])


@router.get("/pool", response_model=PoolOut)
def get_pool(session: SessionDep, principal: CurrentPrincipal) -> PoolOut:
    """The org's GPU pool and how much of it is guaranteed to teams."""
    org = repo.get_org(session)
    committed = repo.committed_gpu_centi(session, org.id)
    return PoolOut(
        name=org.name,
        parent_queue=org.parent_queue,
        **quota.pool_display(org.capacity),
        committed_gpus=format_hundredths(committed),
        free_gpus=format_hundredths(max(0, org.gpus_centi - committed)),
    )


@router.get("/pool/impact", response_model=ImpactOut)
def get_pool_impact(
    session: SessionDep, principal: AdminPrincipal, usage: UsageDep, gpus: Amount
) -> ImpactOut:
    """Every team's guarantee and fair share now and with a pool of `gpus` (admin)."""
    org = repo.get_org(session)
    try:
        new_pool = parse_hundredths(str(gpus), what="gpus")
    except ValueError as exc:
        raise InvalidInput({"gpus": str(exc)}) from None
    return impact_out(org_impact(session, usage, org, new_pool_centi=new_pool, every_team=True))


@router.put("/pool", response_model=PoolOut)
def put_pool(body: PoolIn, session: SessionDep, principal: AdminPrincipal) -> PoolOut:
    """Change the pool (admin). A field left out keeps its value; a pool below the
    guarantees already approved needs `below_committed: true`."""
    fields = body.model_dump(exclude={"below_committed"}, exclude_none=True)
    service.update_pool(
        session,
        actor=principal.user,
        data={k: str(v) for k, v in fields.items()},
        below_committed=body.below_committed,
    )
    return get_pool(session, principal)


def _pool_out(row: pools.PoolRow) -> NodePoolOut:
    pool, found = row.pool, row.found
    return NodePoolOut(
        id=pool.id,
        name=pool.name,
        default=pool.is_default,
        label_value=pool.label_value,
        gpu_type=pool.gpu_type,
        price=None if pool.price_centi is None else format_hundredths(pool.price_centi),
        budget=quota.pool_display(pool.capacity),
        guaranteed_gpus=format_hundredths(row.committed_centi),
        cluster=None
        if found is None
        else NodesOut(
            nodes=found.nodes, gpus=found.gpus, gpu_product=found.gpu_product, shard=found.shard
        ),
        no_nodes=row.no_nodes,
        over_cluster=row.over_cluster,
    )


def _rows(session: Session, portal: Portal) -> list[pools.PoolRow]:
    rows, _unclaimed = pools.pool_rows(
        session, repo.get_org(session), portal.node_pools.get().found
    )
    return rows


@router.get("/sleep-policy", response_model=SleepPolicyOut)
def get_sleep_policy(session: SessionDep, principal: CurrentPrincipal) -> SleepPolicyOut:
    """After how many idle hours a team's cluster sleeps (null: not by the hours), the
    quiet hours when it sleeps after an idle hour, and the most a team may choose."""
    return _policy_out(repo.get_org(session))


@router.put("/sleep-policy", response_model=SleepPolicyOut)
def put_sleep_policy(
    session: SessionDep, principal: AdminPrincipal, body: SleepPolicyIn
) -> SleepPolicyOut:
    """Set the org's sleep policy (admin). Idle means: no pod of the team's vCluster on
    the host, no kubeconfig handed out, no wake."""
    org = repo.get_org(session)
    sleep.set_policy(
        session,
        org,
        after_hours=body.sleep_after_hours,
        max_hours=body.sleep_max_hours,
        actor=principal.user,
        quiet_hours=body.sleep_quiet_hours,
        weekends=body.sleep_weekends,
        time_zone=body.sleep_time_zone,
    )
    return _policy_out(org)


def _policy_out(org: Org) -> SleepPolicyOut:
    return SleepPolicyOut(
        sleep_after_hours=org.sleep_after_hours,
        sleep_max_hours=org.sleep_max_hours,
        sleep_quiet_hours=org.sleep_quiet_hours,
        sleep_weekends=org.sleep_weekends,
        sleep_time_zone=org.time_zone,
    )


@router.get("/pools", response_model=list[NodePoolOut], responses=PAGED)
def list_pools(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    portal: PortalDep,
    window: WindowDep,
) -> list[NodePoolOut]:
    """The org's node pools: the default one first, then by name, each with its budget,
    what is guaranteed there and what the cluster's nodes hold; paged (`limit`,
    `offset`)."""
    rows = _rows(session, portal)
    shown = window.of(rows)
    announce(request, response, window, returned=len(shown), total=len(rows))
    return [_pool_out(row) for row in shown]


def _one(session: Session, portal: Portal, pool_id: int) -> NodePoolOut:
    return next(_pool_out(row) for row in _rows(session, portal) if row.pool.id == pool_id)


@router.post("/pools", response_model=NodePoolOut, status_code=201)
def add_pool(
    body: NodePoolIn, session: SessionDep, principal: AdminPrincipal, portal: PortalDep
) -> NodePoolOut:
    """Add a pool for the nodes labelled `label_value` (admin)."""
    fields = body.model_dump(exclude_none=True)
    pool = pools.add_pool(
        session, actor=principal.user, data={k: str(v) for k, v in fields.items()}
    )
    return _one(session, portal, pool.id)


@router.patch("/pools/{pool_id}", response_model=NodePoolOut)
def change_pool(
    pool_id: Id,
    body: NodePoolChangeIn,
    session: SessionDep,
    principal: AdminPrincipal,
    portal: PortalDep,
) -> NodePoolOut:
    """Change a pool's budget, GPU type or price (admin); a field left out keeps its value."""
    fields = body.model_dump(exclude={"below_committed"}, exclude_none=True)
    pools.change_pool(
        session,
        actor=principal.user,
        pool_id=pool_id,
        data={k: str(v) for k, v in fields.items()},
        below_committed=body.below_committed,
    )
    return _one(session, portal, pool_id)


@router.delete("/pools/{pool_id}", status_code=204)
def remove_pool(pool_id: Id, session: SessionDep, principal: AdminPrincipal) -> Response:
    """Remove a pool no team holds quota in (admin)."""
    pools.remove_pool(session, actor=principal.user, pool_id=pool_id)
    return Response(status_code=204)
