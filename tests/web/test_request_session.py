"""How a request's database session ends: a read with nothing to write is closed on the
event loop (no thread hop: its autocommit connection has nothing to commit); anything else
commits on a thread, and nothing written during a GET is lost."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi import FastAPI
from psycopg.pq import TransactionStatus
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db import after_commit, ends_quietly, read_engine, reads_of, unit_of_work
from app.core.models import User, WebSession, utcnow
from app.runtime import portal_of
from tests.web.conftest import client_for


@pytest.fixture
def reads(
    engine: Engine, session_factory: sessionmaker[Session]
) -> Iterator[sessionmaker[Session]]:
    """The safe requests' sessions, as the portal makes them."""
    own = read_engine(engine)
    yield reads_of(session_factory, own)
    if own is not engine:
        own.dispose()


def test_only_an_autocommit_read_with_nothing_to_write_ends_quietly(
    reads: sessionmaker[Session], session_factory: sessionmaker[Session], db_url: str
) -> None:
    postgres = db_url.startswith("postgresql")
    with reads() as session:
        session.execute(select(User.id)).all()
        # PostgreSQL reads run in autocommit; SQLite's read in a transaction to commit.
        assert ends_quietly(session) is postgres
        session.add(User(email="new@example.org", display_name="New"))
        assert not ends_quietly(session), "a pending insert must be flushed and committed"
        session.rollback()
    with reads() as session:
        session.execute(select(User.id)).all()
        after_commit(session, lambda: None)
        assert not ends_quietly(session), "a callback waits for the commit"
    with session_factory() as session:
        session.execute(select(User.id)).all()
        assert not ends_quietly(session), "a write session's transaction must end"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/me",
        "/teams/1",  # the caller read in the page's own statement (detached), then written
    ],
)
def test_a_get_that_writes_still_commits(app: FastAPI, path: str) -> None:
    lead = client_for(app, "lead-nlp@example.org")
    long_ago = utcnow() - timedelta(minutes=30)
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(update(WebSession).values(last_seen_at=long_ago))
    assert lead.get(path).status_code == 200  # touches the session's last-seen time
    with unit_of_work(portal_of(app).session_factory) as session:
        seen = session.scalars(select(WebSession.last_seen_at)).all()
    assert seen, "a signed-in session exists"
    assert all(at > long_ago + timedelta(minutes=29) for at in seen)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_reads_keep_their_connections_in_autocommit_and_hand_them_back_as_they_are(
    reads: sessionmaker[Session], session_factory: sessionmaker[Session]
) -> None:
    """The reads' pool is their own: its connections are put in autocommit once, and no
    request switches one in or out of it (nor rolls back on return what never began)."""
    for _ in range(3):
        with reads() as session:
            connection = session.connection().connection.dbapi_connection
            assert connection is not None
            assert connection.autocommit
            session.execute(select(User.id)).all()
            assert connection.info.transaction_status == TransactionStatus.IDLE
            raw = connection
        assert raw.autocommit, "handed back to the pool still in autocommit"
    # A write session's connection is a transaction's, from the other pool.
    with session_factory() as session:
        connection = session.connection().connection.dbapi_connection
        assert connection is not None
        assert not connection.autocommit
        assert connection is not raw
        session.rollback()
