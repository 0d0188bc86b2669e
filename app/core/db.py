"""Engine, sessions and the declarative base."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, MetaData, String, create_engine, event, literal_column, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# Statements that write (or open a savepoint): on SQLite the transaction begins before
# the first of them, as pysqlite's own handling did, but for savepoints and DDL too.
_SQLITE_WRITES = (
    "INSERT",
    "UPDATE",
    "DELETE",
    "REPLACE",
    "SAVEPOINT",
    "WITH",
    "CREATE",
    "DROP",
    "ALTER",
)
# An execution option: "NONE" for the read sessions of safe requests (``reads_of``), whose
# statements each run on their own, as PostgreSQL's autocommit reads.
SQLITE_BEGIN = "sqlite_begin"


def constant(value: str) -> ColumnElement[str]:
    """``value`` as an SQL string constant written into the statement, not a parameter.

    For the code's own values only (a status, an event name, the configured chart
    version), never for a user's input. Two reasons to write one: a partial index's
    predicate is matched to a query only when its values are in the statement, and
    PostgreSQL plans a prepared statement's parameters by averages: after five runs it
    keeps one generic plan only if that plan is estimated no costlier than the plans
    made for the values, and a skewed column (a rare event name among many, one chart
    version among a few) makes it re-plan the whole statement on every run."""
    return literal_column("'" + value.replace("'", "''") + "'", String)


def constants(values: Iterable[str]) -> tuple[ColumnElement[str], ...]:
    """``values`` as SQL string constants (``constant``), e.g. for an ``IN`` written as a
    partial index's predicate is."""
    return tuple(constant(value) for value in values)


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine; SQLite gets WAL, foreign keys, a busy timeout and transactions
    that hold every write of a unit of work, savepoints included."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            # pysqlite's own transaction handling opens a transaction only before an
            # INSERT, UPDATE or DELETE, so a SAVEPOINT as a transaction's first write
            # (``begin_nested``) ran outside any transaction and its RELEASE committed it:
            # a crash or rollback after it kept the row. The driver is told to issue no
            # BEGIN at all; the portal issues it (below).
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=10000")
            cursor.close()

        @event.listens_for(engine, "before_cursor_execute")
        def _sqlite_begin(connection: Any, cursor: Any, statement: str, *_args: Any) -> None:
            # SQLAlchemy's documented recipe issues BEGIN when SQLAlchemy begins; this
            # issues it at the transaction's first write instead, so the reads before it
            # take no snapshot: a transaction that reads and then writes waits for the
            # write lock (busy_timeout) instead of failing on a snapshot another writer
            # made stale. BEGIN IMMEDIATE: the write lock at once.
            if connection.connection.dbapi_connection.in_transaction:
                return
            if not connection.in_transaction():
                return
            options = connection.get_execution_options()
            if (
                options.get(SQLITE_BEGIN) == "NONE"
                or options.get("isolation_level") == "AUTOCOMMIT"
            ):
                return
            if statement.lstrip()[:9].upper().startswith(_SQLITE_WRITES):
                cursor.execute("BEGIN IMMEDIATE")

        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 10)
    # No ping before every checkout (a round trip per request): connections are recycled
    # before servers or proxies drop idle ones, and one that died anyway (a database
    # restart) fails its request and invalidates the pool, so the next one reconnects.
    kwargs.setdefault("pool_pre_ping", False)
    kwargs.setdefault("pool_recycle", 300)
    return create_engine(url, **kwargs)


class Effect(StrEnum):
    """Something that must happen once a change is committed. Services ask for effects;
    the application decides what each one does (``make_session_factory(effects=...)``)."""

    PROVISIONING_DUE = "provisioning_due"  # wake the reconciler: a team has work now
    QUOTAS_CHANGED = "quotas_changed"  # forget cached quota rows and fair shares
    ACCESS_CHANGED = "access_changed"  # wake the access sweeper: someone may lose access
    NOTIFIED = "notified"  # wake the delivery worker: messages wait to be sent


def make_session_factory(
    engine: Engine,
    *,
    effects: Mapping[Effect, Callable[[], None]] | None = None,
    channels: frozenset[str] = frozenset(),
) -> sessionmaker[Session]:
    """Sessions whose ``request_effect`` calls run ``effects`` after their commit (read
    when the effect is asked for: a process may route an effect once the job that
    answers it is built). ``channels``: the personal notification channels configured
    besides the in-app bell (``email`` when an SMTP server is set), read by the services
    that notify."""
    return sessionmaker(
        bind=engine,
        expire_on_commit=False,
        autoflush=True,
        info={"effects": effects if effects is not None else {}, "channels": channels},
    )


def configured_channels(session: Session) -> frozenset[str]:
    found: frozenset[str] = session.info.get("channels", frozenset())
    return found


def request_effect(session: Session, effect: Effect) -> None:
    """Run the application's handler for ``effect`` once this transaction commits.

    Asked for by the service that causes the change, so a page and an API call that use
    the service behave the same. Asking twice in one transaction runs it once."""
    handler = session.info.get("effects", {}).get(effect)
    asked: set[Effect] = session.info.setdefault("effects_asked", set())
    if handler is None or effect in asked:
        return
    asked.add(effect)
    after_commit(session, handler)


def discard_changes(session: Session) -> None:
    """Undo this request's unflushed and flushed changes (a refused action shown as a notice
    instead of an error page); the unit of work then commits nothing of it."""
    session.rollback()


@contextmanager
def unit_of_work(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: commit when the block ends, roll back when it raises."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


# An execution option marking the sessions of safe requests on PostgreSQL: their
# connections run in autocommit (``read_engine``).
AUTOCOMMIT_READS = "portal_autocommit_reads"


def read_engine(engine: Engine) -> Engine:
    """The engine of safe requests' reads (``reads_of``). On PostgreSQL, a pool of its own
    whose connections are put in autocommit once, when opened, and handed back as they
    are (an autocommit connection holds no transaction to roll back). Switched at each
    request instead, a connection shared with the writes was put in autocommit when
    taken and back when returned: CPU on the event loop for every request.
    Elsewhere, ``engine`` itself (dispose it once)."""
    if engine.dialect.name != "postgresql":
        return engine
    return make_engine(
        engine.url.render_as_string(hide_password=False),
        isolation_level="AUTOCOMMIT",
        pool_reset_on_return=None,
    )


def reads_of(factory: sessionmaker[Session], reads: Engine) -> sessionmaker[Session]:
    """Sessions for safe requests (GET), on ``reads`` (``read_engine`` of the factory's
    engine): on PostgreSQL their connections run in autocommit, so reads cost no BEGIN
    and COMMIT round trips; the rare write of such a request (a session's last-seen time)
    commits by itself. Making one does no I/O."""
    bind = factory.kw["bind"]
    if bind.dialect.name == "sqlite":
        return sessionmaker(
            **{**factory.kw, "bind": bind.execution_options(**{SQLITE_BEGIN: "NONE"})}
        )
    if bind.dialect.name != "postgresql" or reads is bind:
        return factory
    return sessionmaker(
        **{**factory.kw, "bind": reads.execution_options(**{AUTOCOMMIT_READS: True})}
    )


def ends_quietly(session: Session) -> bool:
    """Whether ending ``session`` talks to no server: it reads in autocommit (``reads_of``)
    and has nothing to flush and nothing to run after a commit, so its commit is empty and
    closing it only hands its connection back to the pool."""
    return (
        bool(session.get_bind().get_execution_options().get(AUTOCOMMIT_READS))
        and not (session.new or session.dirty or session.deleted)
        and not session.info.get("after_commit")
    )


def finish(session: Session, *, commit: bool) -> None:
    """End a request's unit of work: commit it (or roll it back), then close it."""
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def after_commit(session: Session, callback: Callable[[], None]) -> None:
    """Run ``callback`` once this session's transaction has committed (never on rollback)."""
    session.info.setdefault("after_commit", []).append(callback)


@event.listens_for(Session, "after_commit")
def _run_after_commit(session: Session) -> None:
    session.info.pop("effects_asked", None)
    for callback in session.info.pop("after_commit", []):
        callback()


@event.listens_for(Session, "after_rollback")
def _drop_after_commit(session: Session) -> None:
    session.info.pop("after_commit", None)
    session.info.pop("effects_asked", None)


def ping(engine: Engine) -> None:
    """One round trip to the database; raises when it cannot be reached."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def migrations_behind(engine: Engine, script_location: str) -> str | None:
    """None when the database is at the newest migration; otherwise what differs."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = set(ScriptDirectory(script_location).get_heads())
    with engine.connect() as conn:
        current = set(MigrationContext.configure(conn).get_current_heads())
    if current == head:
        return None
    return f"database at {sorted(current) or 'no migration'}, code expects {sorted(head)}"
