"""Queries that must not scan a table that grows without bound, checked in PostgreSQL's
own plans (sequential scans switched off, so a usable index shows whatever the size)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, sessionmaker

from app.audit import repository as audit

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)


def _plan(session: Session, statement: str) -> str:
    session.execute(text("SET LOCAL enable_seqscan = off"))
    rows = session.execute(text("EXPLAIN " + statement)).scalars().all()
    return "\n".join(rows)


def test_the_overview_drift_list_reads_the_action_index(
    session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    captured: list[str] = []
    with session_factory() as session:
        original = session.scalars

        def capture(query: Any, *args: Any, **kwargs: Any) -> Any:
            compiled = query.compile(
                dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
                compile_kwargs={"literal_binds": True},
            )
            captured.append(str(compiled))
            return original(query, *args, **kwargs)

        monkeypatch.setattr(session, "scalars", capture)
        audit.get_all(session, action="provisioning.drift_repaired", limit=5)
        plan = _plan(session, captured[0])
    assert "ix_audit_events_action_id" in plan, plan
    assert "Sort" not in plan, "newest first straight from the index, no sort: " + plan
