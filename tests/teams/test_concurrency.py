"""Racing admins never over-commit the pool; racing leads never open two requests."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import event, text
from sqlalchemy.orm import Session, sessionmaker

from app.core.db import make_engine, unit_of_work
from app.core.errors import Conflict
from app.core.models import User
from app.teams import repository as repo
from app.teams import service
from tests.conftest import TABLES
from tests.factories import make_org, make_user, submit
from tests.servers import free_port, portal_process

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


def _signed_in(url: str, email: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    page = client.get("/login").text
    token = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert token is not None
    client.post("/login/dev", data={"csrf_token": token.group(1), "email": email, "role": "lead"})
    token = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/teams").text)
    assert token is not None
    client.headers["X-CSRF-Token"] = token.group(1)
    return client


def test_concurrent_quota_changes_leave_one_open_request(pg_url: str, tmp_path: Path) -> None:
    """Twenty browsers of the same lead, each its own connection to a running portal on
    PostgreSQL, ask for a quota change at the same moment: one request is opened, the others
    are told one is waiting."""
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    port = free_port()
    env = {
        "PORTAL_DATABASE_URL": pg_url,
        "PORTAL_DEVELOPMENT": "true",
        "PORTAL_SIMULATED_STEP_SECONDS": "0.05",
        "PORTAL_WORKER_INTERVAL_SECONDS": "0.2",
        "PORTAL_USAGE_COLLECTOR_ENABLED": "false",
    }
    try:
        with portal_process(tmp_path, port, env):
            url = f"http://127.0.0.1:{port}"
            clients = [_signed_in(url, "lead-nlp@example.org") for _ in range(20)]
            deadline = time.monotonic() + 60
            while clients[0].get("/api/v1/teams/1").json()["status"] != "ready":
                assert time.monotonic() < deadline, "nlp never became ready"
                time.sleep(0.2)
            barrier = threading.Barrier(len(clients))
            answers: list[int] = [0] * len(clients)

            def ask(i: int) -> None:
                body = {"gpu_quota": f"0.{10 + i}", "gpu_limit": "1"}
                # A new connection per browser, as it sends: the one kept from its sign-in
                # sat idle while the team became ready, past the server's keep-alive (5 s),
                # and a server closing it as the request left reset the request.
                sender = httpx.Client(
                    base_url=url, timeout=30, cookies=clients[i].cookies, headers=clients[i].headers
                )
                with sender:
                    barrier.wait(timeout=30)
                    answers[i] = sender.post(
                        "/api/v1/teams/1/quota-requests", json=body
                    ).status_code

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(clients))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            for client in clients:
                client.close()
        assert sorted(answers) == [201] + [409] * 19, answers
        with engine.connect() as conn:
            still_open = conn.execute(
                text(
                    "SELECT count(*) FROM cluster_requests "
                    "WHERE team_id = 1 AND status = 'submitted'"
                )
            ).scalar()
        assert still_open == 1
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
        engine.dispose()


def test_a_failed_create_leaves_no_half_written_team(
    session_factory: sessionmaker[Session],
) -> None:
    """The team is the transaction's first write, inside a savepoint: when the
    transaction dies after it (a crash or a rollback), nothing of it remains. On SQLite
    under the driver's own transaction handling the savepoint committed by itself, and
    the team stayed with no request, no lead and no audit event, its name blocked."""
    with unit_of_work(session_factory) as session:
        make_org(session, gpus="1")
        lead = make_user(session, "lead@example.org")
        lead_id = lead.id
    session = session_factory()
    try:
        actor = session.get(User, lead_id)
        assert actor is not None
        submit(session, actor, "half-written")
    finally:
        session.rollback()  # as a process killed before its commit
        session.close()
    with session_factory() as check:
        names = check.execute(text("SELECT name FROM teams")).scalars().all()
        assert names == []
        assert check.execute(text("SELECT count(*) FROM audit_events")).scalar_one() == 0
    with unit_of_work(session_factory) as session:
        actor = session.get(User, lead_id)
        assert actor is not None
        assert submit(session, actor, "half-written").id  # the name is free


@pytest.mark.parametrize("round_", range(2))
def test_concurrent_approvals_never_overcommit_another_pool(
    session_factory: sessionmaker[Session], round_: int
) -> None:
    """Four requests of 0.1 GPU in the default pool and 0.8 in a 2-GPU L40S pool: the
    default pool fits all four, the L40S pool two; racing admins approve exactly two."""
    from app.core.models import Pool
    from app.core.quota import Quota

    with unit_of_work(session_factory) as session:
        org = make_org(session, gpus="1")
        l40s = Pool(org_id=org.id, name="l40s", label_value="l40s")
        l40s.set_capacity({"gpu": 200})
        session.add(l40s)
        session.flush()
        admins = [make_user(session, f"admin{i}@example.org", admin=True) for i in range(ADMINS)]
        lead = make_user(session, "lead@example.org")
        request_ids = [
            service.submit_cluster_request(
                session,
                actor=lead,
                name=f"team-{i}",
                values=Quota.of_gpu(10, 100),
                pools={"l40s": Quota.of_gpu(80, 200)},
            ).id
            for i in range(4)
        ]
        admin_ids, org_id, pool_id = [a.id for a in admins], org.id, l40s.id

    outcomes = _race(session_factory, admin_ids, request_ids)

    assert not [o for o in outcomes if o.startswith("error")], outcomes
    assert outcomes.count("approved") == 2, outcomes
    refused = [o for o in outcomes if o != "approved"]
    assert all("in pool l40s" in o and "0.4 GPU is free there" in o for o in refused), refused
    with session_factory() as check:
        assert repo.committed_by_pool(check, org_id)[pool_id] == 160
