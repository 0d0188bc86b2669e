"""Node pools as an admin sees them: the org's pools (the default one, whose nodes carry
no node-pool label, and one per label value), what the cluster holds in each
(discovered: nodes, GPUs, their type, whether a KAI scheduler shard serves the pool),
and what the admin sets: the budget teams may be guaranteed there, the GPU type people
read, a price per GPU-hour.

A pool is a KAI SchedulingShard: its own scheduler sees only the nodes, Queues and
PodGroups labelled with the pool's value (the default pool's: those without the label),
divides its GPUs among its own queues, and lends nothing to another pool.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.core.db import Effect, request_effect
from app.core.errors import Conflict, InvalidInput
from app.core.events import Event
from app.core.models import Org, Pool, User, utcnow
from app.core.quantities import format_hundredths, parse_hundredths
from app.core.quota import GPU, RESOURCES
from app.teams import repository as repo
from app.teams import service

# A pool's name is part of its teams' queue names ("team-<team>-<pool>"), and a queue's
# name is the value of the pods' queue label: at most 63 characters with the longest
# team name (40).
POOL_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
POOL_NAME_MAX = 17
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
LABEL_VALUE_MAX = 63
GPU_TYPE_MAX = 100


@dataclass(frozen=True)
class NodePool:
    """What the cluster holds under one value of the node-pool label ("": the nodes
    without it, KAI's default shard)."""

    label_value: str
    gpu_product: str  # the nodes' nvidia.com/gpu.product (most of them), "" if none
    gpus: float  # allocatable GPUs of its nodes
    nodes: int
    shard: bool | None = None  # a SchedulingShard serves it (None: could not be read)


class NodePoolReader(Protocol):
    def node_pools(self, label_key: str) -> list[NodePool]:
        """Every value of ``label_key`` on the cluster's nodes, the absent one included
        where a node lacks it, with what its nodes hold."""
        ...


@dataclass(frozen=True)
class PoolRow:
    """One pool as the pools page shows it."""

    pool: Pool
    found: NodePool | None  # None: no node carries its label (or discovery failed)
    committed_centi: int  # GPUs guaranteed there to teams, hundredths
    discovered: bool  # whether the cluster's nodes could be read

    @property
    def budget_centi(self) -> int:
        return self.pool.capacity.get(GPU.key, 0)

    @property
    def no_nodes(self) -> bool:
        """Flagged, never silently shrunk: the budget stays as the admin set it."""
        return self.discovered and (self.found is None or self.found.nodes == 0)

    @property
    def over_cluster(self) -> bool:
        """The budget promises more GPUs than the pool's nodes hold."""
        return self.found is not None and self.budget_centi > round(self.found.gpus * 100)


def pool_rows(
    session: Session, org: Org, found: list[NodePool] | None
) -> tuple[list[PoolRow], list[NodePool]]:
    """The org's pools with what the cluster holds in each, and the label values the
    cluster has that no pool names yet (to add). ``found`` None: discovery failed."""
    by_value = {node_pool.label_value: node_pool for node_pool in found or []}
    committed = repo.committed_by_pool(session, org.id)
    pools = repo.get_pools(session, org.id)
    rows = [
        PoolRow(pool, by_value.get(pool.label_value), committed.get(pool.id, 0), found is not None)
        for pool in pools
    ]
    known = {pool.label_value for pool in pools}
    return rows, [node_pool for node_pool in found or [] if node_pool.label_value not in known]


def _text(data: Mapping[str, Any], key: str) -> str | None:
    raw = data.get(key)
    return None if raw is None else str(raw).strip()


def _name_problem(name: str) -> str | None:
    if not POOL_NAME.fullmatch(name) or len(name) > POOL_NAME_MAX:
        return (
            f"use lowercase letters, digits and '-' (at most {POOL_NAME_MAX} characters, "
            "starting and ending with a letter or digit): the name is part of the teams' "
            "queue names in the pool"
        )
    return None


def _label_problem(value: str) -> str | None:
    if not value:
        return "enter the value of the node-pool label on the pool's nodes"
    if not LABEL_VALUE.fullmatch(value) or len(value) > LABEL_VALUE_MAX:
        return (
            f"a label value has at most {LABEL_VALUE_MAX} letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def _details(data: Mapping[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """The GPU type and price as typed (a field left out keeps its value)."""
    fields: dict[str, Any] = {}
    gpu_type = _text(data, "gpu_type")
    if gpu_type is not None:
        if len(gpu_type) > GPU_TYPE_MAX:
            errors["gpu_type"] = f"use at most {GPU_TYPE_MAX} characters"
        fields["gpu_type"] = gpu_type
    price = _text(data, "price")
    if price is not None:
        try:
            fields["price_centi"] = parse_hundredths(price, what="the price") if price else None
        except ValueError as exc:
            errors["price"] = str(exc)
    return fields


def add_pool(session: Session, *, actor: User, data: Mapping[str, Any]) -> Pool:
    """Add a pool for the nodes labelled ``label_value``, named ``name`` (the label value,
    lowercased, when left out), with its budget, GPU type and price."""
    org = repo.lock_org(session, repo.get_org(session).id)
    errors: dict[str, str] = {}
    label_value = _text(data, "label_value") or ""
    problem = _label_problem(label_value)
    if problem:
        errors["label_value"] = problem
    name = _text(data, "name") or label_value.lower()
    problem = _name_problem(name)
    if problem:
        errors["name"] = problem
    amounts, budget_errors = service.pool_amounts(data, {})
    errors.update(budget_errors)
    fields = _details(data, errors)
    pools = repo.get_pools(session, org.id)
    for pool in pools:
        if pool.name == name and "name" not in errors:
            errors["name"] = f"pool {name} exists: choose another name"
        if pool.label_value == label_value and "label_value" not in errors:
            errors["label_value"] = f"pool {pool.name} already has the nodes labelled {label_value}"
    if errors:
        raise InvalidInput(errors)
    pool = Pool(org_id=org.id, name=name, label_value=label_value, **fields)
    pool.set_capacity(amounts)
    session.add(pool)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:  # another admin added it meanwhile
        raise Conflict(
            f"pool {name} was just added by someone else: reload the pools page"
        ) from None
    audit.record(
        session,
        actor=actor,
        event=Event.POOL_CREATED,
        summary=f"pool {name} added: nodes labelled {label_value}, "
        f"{format_hundredths(amounts[GPU.key])} GPU to guarantee",
        details={"pool": name, "label_value": label_value, "gpus": amounts[GPU.key]},
    )
    return pool


def change_pool(
    session: Session,
    *,
    actor: User,
    pool_id: int,
    data: Mapping[str, Any],
    below_committed: bool = False,
) -> tuple[Pool, bool]:
    """Change a pool's budget, GPU type or price (a field left out keeps its value). The
    default pool's budget is the org's pool (``service.update_pool``, with its check
    against what is guaranteed); another pool's is checked the same way. Returns the pool
    and whether anything changed."""
    org = repo.lock_org(session, repo.get_org(session).id)
    pool = repo.get_pool(session, org.id, pool_id)
    errors: dict[str, str] = {}
    fields = _details(data, errors)
    if errors:
        raise InvalidInput(errors)
    parts: list[str] = []
    default_changed = False
    if any(_text(data, res.pool_field) is not None for res in RESOURCES):
        if pool.is_default:  # the org's pool: its own check, its own audit entry
            was = pool.capacity
            service.update_pool(session, actor=actor, data=data, below_committed=below_committed)
            default_changed = repo.get_org(session).capacity != was
        else:
            parts += _change_budget(session, pool, data, below_committed=below_committed)
    for key, value in fields.items():
        was = getattr(pool, key)
        if was != value:
            parts.append(f"{_WORDS[key]} {_shown(key, was)} → {_shown(key, value)}")
            setattr(pool, key, value)
    if parts:
        audit.record(
            session,
            actor=actor,
            event=Event.POOL_UPDATED,
            summary=f"pool {pool.name}: " + "; ".join(parts),
            details={"pool": pool.name, "changes": parts},
        )
    session.flush()
    return pool, bool(parts) or default_changed


_WORDS = {"gpu_type": "GPU type", "price_centi": "price a GPU-hour"}


def _shown(key: str, value: object) -> str:
    if value is None or value == "":
        return "not set"
    return format_hundredths(int(str(value))) if key == "price_centi" else str(value)


def _change_budget(
    session: Session, pool: Pool, data: Mapping[str, Any], *, below_committed: bool
) -> list[str]:
    """The pool's budget as typed, checked against what teams are guaranteed there;
    returns what changed, in words."""
    was = pool.capacity
    amounts, errors = service.pool_amounts(data, was)
    committed = repo.committed_by_pool(session, pool.org_id).get(pool.id, 0)
    service.below_guarantees(
        amounts, errors, committed, below_committed=below_committed, pool=pool.name
    )
    if amounts == {res.key: was.get(res.key, 0) for res in RESOURCES}:
        return []
    pool.set_capacity(amounts)
    now = utcnow()
    for team in repo.teams_holding_pool(session, pool.id):
        team.desired_generation += 1  # the pool's queue they hang from changes
        team.next_attempt_at = now
    request_effect(session, Effect.PROVISIONING_DUE)
    request_effect(session, Effect.QUOTAS_CHANGED)
    return [
        f"{res.pool_label} to guarantee {res.text(was.get(res.key, 0)) or '0'} → "
        f"{res.text(amounts[res.key]) or '0'}"
        for res in RESOURCES
        if amounts[res.key] != was.get(res.key, 0)
    ]


def remove_pool(session: Session, *, actor: User, pool_id: int) -> str:
    """Remove a pool no team holds quota in; returns its name."""
    org = repo.lock_org(session, repo.get_org(session).id)
    pool = repo.get_pool(session, org.id, pool_id)
    if pool.is_default:
        raise Conflict(
            "the default pool holds the nodes without a pool label and cannot be removed"
        )
    holding = repo.teams_in_pool(session, pool.id)
    if holding:
        who = (
            f"team {holding[0]} holds" if len(holding) == 1 else f"teams {', '.join(holding)} hold"
        )
        raise Conflict(f"{who} quota in pool {pool.name}: set it to none there first")
    for line in repo.lines_in_pool_of_teams_gone(session, pool.id):
        session.delete(line)
    session.delete(pool)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:  # requests or decisions on record name it
        raise Conflict(
            f"pool {pool.name} appears in requests or decisions on record: set its budget "
            "to 0 instead, so that no new guarantee fits there"
        ) from None
    audit.record(
        session,
        actor=actor,
        event=Event.POOL_REMOVED,
        summary=f"pool {pool.name} removed (nodes labelled {pool.label_value})",
        details={"pool": pool.name, "label_value": pool.label_value},
    )
    return pool.name


@dataclass(frozen=True)
class Discovery:
    """The cluster's node pools as last read (None: could not be read, ``error`` says why)."""

    found: list[NodePool] | None
    error: str | None = None


class NodePools:
    """The cluster's node pools, read at most once per ``ttl`` seconds whoever asks (the
    pools page and its API; a read is one list of nodes and one of shards)."""

    def __init__(self, reader: NodePoolReader, label_key: str, *, ttl: float = 15.0) -> None:
        self.reader, self.label_key, self.ttl = reader, label_key, ttl
        self._lock = threading.Lock()
        self._last: tuple[float, Discovery] | None = None

    def get(self) -> Discovery:
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < self.ttl:
                return self._last[1]
            try:
                found = Discovery(self.reader.node_pools(self.label_key))
            except Exception as exc:  # shown on the page; the pools stay as set
                found = Discovery(None, f"the cluster's nodes could not be read: {exc}")
            self._last = (time.monotonic(), found)
            return found

    def forget(self) -> None:
        with self._lock:
            self._last = None
