"""Several admins approving at the same moment never over-commit the pool."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.core.db import unit_of_work
from app.core.errors import Conflict
from app.core.models import User
from app.teams import repository as repo
from app.teams import service
from tests.factories import make_org, make_user, submit

ADMINS = 4


def _race(
    factory: sessionmaker[Session], admin_ids: list[int], request_ids: list[int]
) -> list[str]:
    """Each thread approves one request; all start together. Returns each outcome."""
    barrier = threading.Barrier(len(request_ids))
    outcomes: list[str] = [""] * len(request_ids)

    def approve(i: int) -> None:
        try:
            with unit_of_work(factory) as session:
                # Hold every transaction open a moment before it commits, so that all
                # of them have read the pool before any approval lands.
                event.listen(session, "before_commit", lambda _s: time.sleep(0.2))
                admin = session.get(User, admin_ids[i % len(admin_ids)])
                assert admin is not None
                barrier.wait(timeout=10)
                service.approve(session, actor=admin, request_id=request_ids[i])
            outcomes[i] = "approved"
        except Conflict as exc:
            outcomes[i] = "refused: " + exc.message
        except Exception as exc:  # a lock error would show here and fail the test
            outcomes[i] = f"error: {type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=approve, args=(i,)) for i in range(len(request_ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return outcomes


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_approvals_never_overcommit(
    session_factory: sessionmaker[Session], round_: int
) -> None:
    with unit_of_work(session_factory) as session:
        org = make_org(session, gpus="1")
        admins = [make_user(session, f"admin{i}@example.org", admin=True) for i in range(ADMINS)]
        lead = make_user(session, "lead@example.org")
        # Four requests of 0.4 GPU: any two fit in one GPU, three do not.
        request_ids = [submit(session, lead, f"team-{i}", gpu_quota="0.4").id for i in range(4)]
        admin_ids = [a.id for a in admins]
        org_id = org.id

    outcomes = _race(session_factory, admin_ids, request_ids)

    assert not [o for o in outcomes if o.startswith("error")], outcomes
    assert outcomes.count("approved") == 2, outcomes
    assert all("0.2 GPU is free" in o or "0 GPU is free" in o for o in outcomes if o != "approved")
    with session_factory() as check:
        assert repo.committed_gpu_centi(check, org_id) == 80


def test_the_same_request_is_approved_once(session_factory: sessionmaker[Session]) -> None:
    with unit_of_work(session_factory) as session:
        make_org(session, gpus="1")
        admins = [make_user(session, f"admin{i}@example.org", admin=True) for i in range(2)]
        lead = make_user(session, "lead@example.org")
        request_id = submit(session, lead, "nlp").id
        admin_ids = [a.id for a in admins]

    outcomes = _race(session_factory, admin_ids, [request_id, request_id])

    assert sorted(o.split(":")[0] for o in outcomes) == ["approved", "refused"], outcomes
    with session_factory() as check:
        decisions = repo.get_decisions(check, [request_id])
        assert len(decisions) == 1
