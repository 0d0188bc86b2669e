"""Several reads in one round trip, the one way a page reads its lists: a page that shows
a few short lists about one thing (a team's requests, members, grants and events) asks
PostgreSQL for all of them in one statement instead of one statement each.

Each read is an ordinary select of whole entities and columns (``Read``), written in its
domain's repository; ``read`` runs one on its own, as before. ``read_together`` runs
several: on PostgreSQL each becomes ``ARRAY((SELECT json_build_array(...) ... ORDER BY
...))``, a column of one statement, so each list keeps its select's order, filter and
limit; elsewhere (SQLite, in-process: no round trip to save) each select runs on its own.
Either way the entities come back as the same values, each built from its columns and
detached from the session: for showing, not for changing. Their relationships are not
loaded, and reaching one raises ``DetachedInstanceError`` on every database alike (so a
page that needs one reads it, and a test on either database shows it).

What this saves: about half the CPU of the team page's four lists, and three round
trips (each one a wait for the interpreter lock under load); bench/README.md has the
figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Generic, TypeVar, overload

from sqlalchemy import JSON, Boolean, Date, DateTime, Enum, Float, Integer, String, func, select
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapper, Session
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.sql import ColumnElement, Select
from sqlalchemy.types import TypeDecorator, TypeEngine

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")

Rows = Sequence[tuple[Any, ...]]
AnySelect = Select[*tuple[Any, ...]]


@dataclass(frozen=True)
class Read(Generic[T]):
    """A select to run later, alone or together with others, and what makes its value
    from the rows. The statement should be built once (a module constant): the combined
    statement is built once per combination of statements."""

    statement: AnySelect
    params: Mapping[str, Any]
    finish: Callable[[Rows], T]


def read(session: Session, pending: Read[T]) -> T:
    """One read on its own: the entities are the session's, as any query's."""
    rows = session.execute(pending.statement, dict(pending.params)).all()
    return pending.finish([tuple(row) for row in rows])


@overload
def read_together(session: Session, a: Read[A], b: Read[B], /) -> tuple[A, B]: ...
@overload
def read_together(session: Session, a: Read[A], b: Read[B], c: Read[C], /) -> tuple[A, B, C]: ...
@overload
def read_together(
    session: Session, a: Read[A], b: Read[B], c: Read[C], d: Read[D], /
) -> tuple[A, B, C, D]: ...
def read_together(session: Session, *reads: Read[Any]) -> tuple[Any, ...]:
    """Every read's value, in one statement on PostgreSQL. Reads that share a parameter
    name must give it the same value."""
    return read_all(session, reads)


def read_all(session: Session, reads: Sequence[Read[Any]]) -> tuple[Any, ...]:
    """``read_together`` of any number of reads, untyped: for a caller that runs its own
    reads in the statement of reads it was given."""
    params: dict[str, Any] = {}
    for pending in reads:
        for name, value in pending.params.items():
            if name in params and params[name] != value:
                raise ValueError(f"reads read together give {name!r} two values")
            params[name] = value
    dialect = session.get_bind().dialect
    statements = tuple(pending.statement for pending in reads)
    shapes = _shapes(statements, dialect)
    if dialect.name == "postgresql":
        row = session.execute(_combined(statements, dialect), params).one()
        lists = [
            [shape.from_json(values) for values in column or ()]
            for shape, column in zip(shapes, row, strict=True)
        ]
    else:
        lists = [
            [shape.from_columns(tuple(values)) for values in session.execute(shape.flat, params)]
            for shape in shapes
        ]
    return tuple(pending.finish(rows) for pending, rows in zip(reads, lists, strict=True))


# PostgreSQL takes at most 100 arguments to a function: json_build_array of one entity.
_MOST_COLUMNS = 100


@dataclass(frozen=True)
class _Entity:
    mapper: Mapper[Any]
    keys: tuple[str, ...]
    columns: tuple[ColumnElement[Any], ...]
    converters: tuple[Callable[[Any], Any], ...]  # from PostgreSQL's JSON
    identity: tuple[int, ...]  # positions of the primary key's columns

    def build(self, values: Sequence[Any]) -> Any:
        if all(values[i] is None for i in self.identity):
            return None  # the outer side of a join, with no row
        instance = self.mapper.class_manager.new_instance()
        instance.__dict__.update(zip(self.keys, values, strict=True))
        # Detached, as ``make_transient_to_detached`` leaves it: on a new instance with
        # every column set, all that function changes is the identity key (it also
        # resets history there is none of, and expires what is not loaded: only the
        # relationships, which expiring leaves as they are), and it cost a noticeable
        # share of a team page; ``tests/core/test_together.py`` compares the two.
        instance_state(instance).key = self.mapper.identity_key_from_primary_key(
            tuple(values[i] for i in self.identity)
        )
        return instance


@dataclass(frozen=True)
class _Shape:
    """What one select returns: entities and plain columns, in order."""

    statement: AnySelect
    parts: tuple[_Entity | ColumnElement[Any], ...]
    converters: tuple[Callable[[Any], Any] | None, ...]  # a plain column's, from JSON
    flat: AnySelect  # the statement's every column, as values: where not one statement

    def from_columns(self, values: Sequence[Any]) -> tuple[Any, ...]:
        out: list[Any] = []
        at = 0
        for part in self.parts:
            if isinstance(part, _Entity):
                out.append(part.build(values[at : at + len(part.columns)]))
                at += len(part.columns)
            else:
                out.append(values[at])
                at += 1
        return tuple(out)

    def from_json(self, values: Sequence[Any]) -> tuple[Any, ...]:
        out: list[Any] = []
        for part, convert, value in zip(self.parts, self.converters, values, strict=True):
            if isinstance(part, _Entity):
                converted = [
                    to(v) if v is not None else None
                    for to, v in zip(part.converters, value, strict=True)
                ]
                out.append(part.build(converted))
            else:
                assert convert is not None
                out.append(convert(value) if value is not None else None)
        return tuple(out)


@lru_cache(maxsize=64)
def _shapes(statements: tuple[AnySelect, ...], dialect: Dialect) -> tuple[_Shape, ...]:
    return tuple(_shape(statement, dialect) for statement in statements)


def _shape(statement: AnySelect, dialect: Dialect) -> _Shape:
    """The select's entities and columns, and how each column comes back from JSON (a
    type this cannot carry is refused here, before any statement runs)."""
    parts: list[_Entity | ColumnElement[Any]] = []
    converters: list[Callable[[Any], Any] | None] = []
    for described in statement.column_descriptions:
        expression = described["expr"]
        entity = described["entity"]
        if isinstance(expression, type) and entity is expression:
            mapper: Mapper[Any] = described["entity"].__mapper__
            attributes = list(mapper.column_attrs)
            if len(attributes) > _MOST_COLUMNS:
                raise ValueError(f"{mapper.class_.__name__} has over {_MOST_COLUMNS} columns")
            columns = tuple(a.columns[0] for a in attributes)
            keys = tuple(a.key for a in attributes)
            identity = tuple(columns.index(c) for c in mapper.primary_key)
            entity_converters = tuple(_converter(c.type, dialect) for c in columns)
            parts.append(_Entity(mapper, keys, columns, entity_converters, identity))
            converters.append(None)
        else:
            clause = getattr(expression, "__clause_element__", None)
            column = clause() if clause is not None else expression
            parts.append(column)
            converters.append(_converter(column.type, dialect))
    flat = statement.with_only_columns(
        *(c for p in parts for c in (p.columns if isinstance(p, _Entity) else [p])),
        maintain_column_froms=True,
    )
    return _Shape(statement, tuple(parts), tuple(converters), flat)


@lru_cache(maxsize=64)
def _combined(statements: tuple[AnySelect, ...], dialect: Dialect) -> AnySelect:
    """One statement: a column per select, the array of its rows, each row a JSON array
    (one nested array per entity)."""
    columns = []
    for shape in _shapes(statements, dialect):
        row = func.json_build_array(
            *(
                func.json_build_array(*part.columns) if isinstance(part, _Entity) else part
                for part in shape.parts
            )
        )
        inner = shape.statement.with_only_columns(row, maintain_column_froms=True)
        columns.append(func.array(inner.scalar_subquery()))
    return select(*columns)


def _identity(value: Any) -> Any:
    return value


def _converter(kind: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any]:
    """How a value of this column type, as PostgreSQL writes it in JSON, becomes what a
    query would have returned. Refuses a type it does not know (at the shape's making)."""
    if isinstance(kind, TypeDecorator):
        inner = _converter(kind.impl_instance, dialect)

        def decorated(value: Any) -> Any:
            return kind.process_result_value(inner(value), dialect)

        return decorated
    if isinstance(kind, DateTime):
        return datetime.fromisoformat
    if isinstance(kind, Date):
        return date.fromisoformat
    if isinstance(kind, Enum):
        processor: Callable[[Any], Any] | None = kind.result_processor(  # type: ignore[no-untyped-call]
            dialect, None
        )
        return processor or _identity
    if isinstance(kind, JSON | Integer | String | Boolean | Float):
        return _identity
    raise TypeError(f"read_together cannot carry a column of type {kind!r}")
