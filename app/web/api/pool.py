"""API: the org's GPU pool."""

from __future__ import annotations

from fastapi import APIRouter

from app.core import quota
from app.core.errors import InvalidInput
from app.core.quantities import format_hundredths, parse_hundredths
from app.teams import repository as repo
from app.teams import service
from app.web.deps import AdminPrincipal, CurrentPrincipal, SessionDep, UsageDep
from app.web.schemas import PROBLEMS, Amount, ImpactOut, PoolIn, PoolOut
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
