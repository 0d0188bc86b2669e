"""An in-process stand-in for demos and first contact. It never pretends to be a cluster.

Objects live in this process's memory. Each step becomes ready some seconds after it is
applied, failures can be injected per step, and usage moves believably over time.
"""

from __future__ import annotations

import functools
import hashlib
import math
import secrets
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from app.access import kubeconfigs
from app.access.credentials import Account, IssuedCredential, Person
from app.core.models import Sleep, Step
from app.core.quota import GPU
from app.provisioning.backend import (
    ASLEEP,
    DONE,
    MISSING,
    OUTDATED,
    PROGRESSING,
    BackendError,
    Eviction,
    KaiReason,
    Observation,
    QueueFigures,
    RefusedPod,
    ResourceQuota,
    TeamSpec,
    TemplateCheck,
    Workload,
    template_objects,
)
from app.teams.pools import NodePool
from app.usage import fairshare
from app.usage.sources import ClusterTop, QueueUsage, TopQueue

SIMULATED_NOTICE = "SIMULATED cluster backend: nothing was created in any real cluster."


@dataclass(slots=True)
class _Object:
    spec: TeamSpec
    ready_at: float
    version: str | None = None  # the vCluster's chart version


@dataclass
class _Account:
    cluster_role: str
    created_at: datetime
    tokens: dict[str, datetime]  # token -> expiry
    uid: str


@dataclass
class _Fault:
    step: Step
    team: str | None
    remaining: int
    message: str


@dataclass(frozen=True)
class PlayedWorkload:
    """A pod played in a simulated team's vCluster."""

    namespace: str
    name: str
    gpus: float
    pool: str = ""  # the pool's label value ("": the default pool)
    preemptible: bool = True
    created: datetime = datetime(2026, 1, 1, tzinfo=UTC)


def judged(
    work: PlayedWorkload, queue: str, entry: ResourceQuota, allocated: float
) -> tuple[KaiReason, ...]:
    """KAI's capacity checks of the proportion plugin for one workload, in its order
    (``capacity_policy``: the queue's limit, then a non-preemptible workload within the
    guarantee), with the figures KAI writes beside its reason."""
    limit = math.inf if entry.limit < 0 else entry.limit
    non_preemptible = 0.0 if work.preemptible else work.gpus
    figures = QueueFigures(
        queue,
        deserved=entry.quota,
        allocated=allocated,
        allocated_non_preemptible=0.0,
        limit=limit,
        asked=work.gpus,
        asked_non_preemptible=non_preemptible,
    )
    if allocated + work.gpus > limit + 1e-9:
        message = (
            f"{queue} quota has reached the allowable limit of GPUs. Limit is {limit:g} GPUs, "
            f"currently {allocated:g} GPUs allocated and workload requested {work.gpus:g} GPUs"
        )
        return (KaiReason("OverLimit", message, "", figures),)
    if not work.preemptible and work.gpus > entry.quota + 1e-9:
        message = (
            f"Non-preemptible workload is over quota. Workload requested {work.gpus:g} GPUs, "
            f"but {queue} quota is {entry.quota:g} GPUs, while 0 GPUs are already allocated "
            "for non-preemptible pods. Use a preemptible workload to go over quota."
        )
        return (KaiReason("NonPreemptibleOverQuota", message, "", figures),)
    return ()


class SimulatedBackend:
    kind = "simulated"
    simulated = True

    def __init__(
        self,
        *,
        step_seconds: float = 1.5,
        call_seconds: float = 0.0,
        cluster_gpus: float | None = None,
        chart_version: str | None = None,
        node_pools: Sequence[tuple[str, str, float]] = (),
        example_work: bool = False,
    ) -> None:
        self.step_seconds = step_seconds
        # The chart a vCluster is installed with; one at another version is outdated (and
        # upgraded in turn, as the real backend reports it). None: versions not tracked.
        self.chart_version = chart_version
        self.call_seconds = call_seconds
        # The simulated cluster's GPUs (None: as many as the org's pool). KAI divides
        # these among the top-level queues; the org's pool is its queue's guarantee.
        self.cluster_gpus = cluster_gpus
        # The node pools beside the default one: (label value, GPU type, GPUs), a node each.
        self.node_pool_specs = tuple(node_pools)
        self._objects: dict[tuple[Step, str], _Object] = {}
        # Each queue's spec by name, made again after any object changed (the usage read
        # and the cluster's top level ask for it every few seconds: at 10,000 teams a walk
        # over 50,000 objects each time).
        self._queue_specs: dict[str, TeamSpec] | None = None
        self._columns: _QueueColumns | None = None  # of the ``_queue_specs`` it names
        # The other pools' columns, and the specs they were made of.
        self._pool_columns: tuple[dict[str, TeamSpec], dict[str, _QueueColumns]] | None = None
        self._faults: list[_Fault] = []
        self._pinned: dict[str, tuple[float, float]] = {}
        self._smallest: dict[str, float] = {}
        self._accounts: dict[str, dict[str, _Account]] = {}
        # What of each team's template someone deleted inside its vCluster ("Kind name").
        self._template_gone: dict[str, set[str]] = {}
        # The teams whose vCluster is paused (its objects kept, its pods gone: no demand).
        self._asleep: set[str] = set()
        # Workloads played per team (judged as KAI judges them), and KAI's evictions.
        self._played: dict[str, list[PlayedWorkload]] = {}
        self._evicted: dict[str, list[Eviction]] = {}
        if example_work:
            self._play_example(datetime.now(UTC))
        self._lock = threading.Lock()
        self.calls = 0

    # --- failure injection -------------------------------------------------------------

    def inject_failure(
        self, step: Step, *, team: str | None = None, times: int = 1, message: str = ""
    ) -> None:
        """Make the next ``times`` applies of ``step`` (for ``team`` or any team) fail."""
        text = message or f"injected failure while applying {step.value}"
        with self._lock:
            self._faults.append(_Fault(step, team, times, text))

    def pin_usage(
        self,
        team: str,
        *,
        allocated: float,
        requested: float,
        smallest_waiting: float | None = None,
    ) -> None:
        """Hold a team's queue at these figures instead of its wave (for demos and tests:
        to see a team borrow, wait or go above its fair share on purpose); with the GPUs
        of its smallest waiting pod, where that matters."""
        with self._lock:
            self._pinned[f"team-{team}"] = (allocated, requested)
            if smallest_waiting is None:
                self._smallest.pop(f"team-{team}", None)
            else:
                self._smallest[f"team-{team}"] = smallest_waiting

    def _maybe_fail(self, step: Step, team: str) -> None:
        for fault in self._faults:
            if fault.step == step and fault.team in (None, team) and fault.remaining > 0:
                fault.remaining -= 1
                raise BackendError(f"simulated: {fault.message}")

    # --- steps -------------------------------------------------------------------------

    def _delay(self, step: Step) -> float:
        # The vCluster control plane takes longest, as it does in a real cluster.
        return self.step_seconds * (2 if step == Step.VCLUSTER else 1)

    def begin_pass(self) -> None:
        """Objects live in memory: nothing to read ahead of a pass."""

    def end_pass(self) -> None:
        """Nothing was read ahead of the pass."""

    def _slow_call(self) -> None:
        if self.call_seconds:
            time.sleep(self.call_seconds)

    def observe(self, step: Step, spec: TeamSpec) -> Observation:
        self._slow_call()
        with self._lock:
            self.calls += 1
            if step == Step.KUBECONFIG:
                vcluster = self._objects.get((Step.VCLUSTER, spec.team))
                if vcluster is None or vcluster.ready_at > time.monotonic():
                    return Observation(PROGRESSING, "waiting for the vCluster to become ready")
                return Observation(DONE, f"kubeconfig secret vc-{spec.team} is available")
            obj = self._objects.get((step, spec.team))
            if obj is None:
                return Observation(MISSING, f"{_describe(step, spec)} does not exist")
            if step == Step.VCLUSTER and spec.team in self._asleep:
                return Observation(
                    ASLEEP, f"{_describe(step, spec)} is asleep (simulated)", obj.version
                )
            if step == Step.QUEUE and _queue_of(obj.spec) != _queue_of(spec):
                return Observation(
                    MISSING, f"queue {spec.queue_name} differs from the approved quota"
                )
            if obj.ready_at > time.monotonic():
                return Observation(PROGRESSING, f"{_describe(step, spec)} is starting", obj.version)
            wanted = self.chart_version
            if step == Step.VCLUSTER and wanted and obj.version and obj.version != wanted:
                return Observation(
                    OUTDATED,
                    f"{_describe(step, spec)} runs chart {obj.version}; {wanted} is configured",
                    obj.version,
                )
            return Observation(DONE, f"{_describe(step, spec)} is ready (simulated)", obj.version)

    def apply(self, step: Step, spec: TeamSpec) -> Observation:
        self._slow_call()
        with self._lock:
            self.calls += 1
            self._maybe_fail(step, spec.team)
            if step != Step.KUBECONFIG:
                existing = self._objects.get((step, spec.team))
                version = self.chart_version if step == Step.VCLUSTER else None
                kept = existing is not None and step != Step.QUEUE and existing.version == version
                # An upgrade restarts the control plane: it takes a step's time again.
                ready_at = existing.ready_at if kept and existing else time.monotonic()
                if not kept:
                    ready_at += self._delay(step)
                self._objects[(step, spec.team)] = _Object(spec, ready_at, version)
                self._queue_specs = None
                if step == Step.VCLUSTER and not kept:
                    self._template_gone.pop(spec.team, None)  # a new install applies it all
        return self.observe(step, spec)

    def sleep(self, spec: TeamSpec) -> Observation:
        """Paused at once: a simulated vCluster has no pods to wait for."""
        self._slow_call()
        with self._lock:
            self.calls += 1
            self._maybe_fail(Step.VCLUSTER, spec.team)
            if (Step.VCLUSTER, spec.team) not in self._objects:
                raise BackendError(f"vCluster {spec.vcluster_name} does not exist")
            self._asleep.add(spec.team)
            self._queue_specs = None  # its demand goes
        return self.observe(Step.VCLUSTER, spec)

    def wake(self, spec: TeamSpec) -> Observation:
        """Resumed: its control plane starts again (a vCluster step's time)."""
        self._slow_call()
        with self._lock:
            self.calls += 1
            self._maybe_fail(Step.VCLUSTER, spec.team)
            obj = self._objects.get((Step.VCLUSTER, spec.team))
            if obj is None:
                raise BackendError(f"vCluster {spec.vcluster_name} does not exist")
            if spec.team in self._asleep:
                self._asleep.discard(spec.team)
                obj.ready_at = time.monotonic() + self._delay(Step.VCLUSTER)
                self._queue_specs = None
        return self.observe(Step.VCLUSTER, spec)

    def running_pods(self) -> dict[str, int]:
        """A pod per GPU (rounded up) of each awake team's demand now, in its namespace;
        an idle team (its wave at rest, or held at nothing by ``pin_usage``) runs none."""
        with self._lock:
            columns = self._columns_locked()
            pinned = dict(self._pinned)
        if columns is None:
            return {}
        demand = columns.demand(time.time()).tolist()
        found: dict[str, int] = {}
        for name, row in columns.at.items():
            want = pinned[name][1] if name in pinned else demand[row]
            if want > 0.01 and columns.specs[name].team not in self._asleep:
                found[columns.specs[name].namespace] = math.ceil(want)
        return found

    def pause_by_hand(self, team: str) -> None:
        """Play an operator running `vcluster pause` on the team's vCluster."""
        with self._lock:
            self._asleep.add(team)
            self._queue_specs = None

    def resume_by_hand(self, team: str) -> None:
        """Play an operator running `vcluster resume`."""
        with self._lock:
            if team in self._asleep:
                self._asleep.discard(team)
                self._queue_specs = None

    @property
    def empty(self) -> bool:
        with self._lock:
            return not self._objects

    def restore(self, spec: TeamSpec, steps: Collection[Step], version: str | None) -> None:
        """What an earlier process of the portal created, as its database records it
        (``steps`` done, the vCluster at chart ``version``): the simulated cluster lives
        in memory, so a restart would otherwise look like every object deleted."""
        with self._lock:
            for step in steps:
                if step != Step.KUBECONFIG:
                    kept = version if step == Step.VCLUSTER else None
                    self._objects.setdefault((step, spec.team), _Object(spec, 0.0, kept))
            if spec.sleep == Sleep.ASLEEP:  # paused before the restart: still paused
                self._asleep.add(spec.team)
            self._queue_specs = None

    def remove(self, step: Step, spec: TeamSpec) -> Observation:
        self._slow_call()
        with self._lock:
            self.calls += 1
            self._maybe_fail(step, spec.team)
            self._objects.pop((step, spec.team), None)
            self._queue_specs = None
            if step == Step.VCLUSTER:
                self._accounts.pop(spec.team, None)  # its accounts go with it
                self._asleep.discard(spec.team)
        return Observation(DONE, f"{_describe(step, spec)} deleted (simulated)")

    def delete_template_object(self, team: str, what: str) -> None:
        """Play a lead deleting an object of the team's template inside its vCluster
        ("CustomResourceDefinition experiments.nlp.example.org", "chart hello")."""
        with self._lock:
            self._template_gone.setdefault(team, set()).add(what)

    def check_template(self, spec: TeamSpec, *, repair: bool) -> TemplateCheck:
        self._slow_call()
        with self._lock:
            self.calls += 1
            if (Step.VCLUSTER, spec.team) not in self._objects:
                raise BackendError(f"vCluster {spec.vcluster_name} does not exist")
            gone = self._template_gone.get(spec.team, set())
            objects = [
                f"{d['kind']} {d['metadata']['name']}"
                for d in template_objects(spec.template_manifests)
            ]
            charts = [f"chart {release}" for release, _ns in spec.template_charts]
            missing = [o for o in objects if o in gone]
            missing += [
                f"{c} (in {ns})"
                for c, (_r, ns) in zip(charts, spec.template_charts, strict=True)
                if c in gone
            ]
            repaired = [o for o in missing if o in objects] if repair else []
            gone.difference_update(repaired)
            return TemplateCheck(tuple(missing), tuple(repaired))

    def finish(self, step: Step, team: str) -> None:
        """Play a step's time passing: the object made for it is ready now."""
        with self._lock:
            made = self._objects.get((step, team))
            if made is not None:
                self._objects[(step, team)] = _Object(made.spec, time.monotonic(), made.version)

    def delete_object(self, step: Step, team: str) -> None:
        """Play an operator deleting something by hand (drift)."""
        with self._lock:
            self._objects.pop((step, team), None)
            self._queue_specs = None

    # --- personal credentials (in memory, with the same expiry and revocation) ------------

    def _vcluster(self, spec: TeamSpec) -> None:
        if (Step.VCLUSTER, spec.team) not in self._objects:
            raise BackendError(f"vCluster {spec.vcluster_name} does not exist")

    def issue_credential(
        self, spec: TeamSpec, person: Person, *, ttl_seconds: int
    ) -> IssuedCredential:
        self._slow_call()
        token = "simulated-" + secrets.token_urlsafe(24)
        expires_at = datetime.now(UTC) + timedelta(seconds=ttl_seconds)
        with self._lock:
            self.calls += 1
            self._vcluster(spec)
            accounts = self._accounts.setdefault(spec.team, {})
            held = accounts.get(person.account)
            if held is None or held.cluster_role != person.cluster_role:
                held = _Account(person.cluster_role, datetime.now(UTC), {}, secrets.token_hex(8))
                accounts[person.account] = held
            held.tokens[token] = expires_at
        text = kubeconfigs.token_kubeconfig(
            team=spec.team,
            person=person,
            server=f"https://{spec.team}.vcluster.simulated.invalid",
            ca_data=None,
            token=token,
            expires_at=expires_at,
            note=SIMULATED_NOTICE + " This address does not exist.",
        )
        return IssuedCredential(text, expires_at, kubeconfigs.token_id(token))

    def refused_pods(self, spec: TeamSpec) -> list[RefusedPod]:
        """A simulated cluster has no host to refuse anything."""
        self._slow_call()
        return []

    # --- KAI's decisions about the teams' work -----------------------------------------

    def play_workload(self, team: str, workload: PlayedWorkload) -> None:
        """A pod the team created in its vCluster, judged by the simulated KAI."""
        with self._lock:
            self._played.setdefault(team, []).append(workload)

    def play_eviction(self, team: str, eviction: Eviction) -> None:
        """An ``Evict`` event KAI wrote on one of the team's PodGroups."""
        with self._lock:
            self._evicted.setdefault(team, []).append(eviction)

    def workloads(self, spec: TeamSpec) -> list[Workload]:
        """The played workloads, each judged with KAI's two capacity checks (the queue's
        limit; a non-preemptible one within the guarantee) against the queue's simulated
        figures at this moment; one that passes runs."""
        self._slow_call()
        with self._lock:
            played = list(self._played.get(spec.team, ()))
        queues = {"": (spec.queue_name, spec.gpu)}
        for pool in spec.pools:
            queues[pool.label_value] = (pool.queue_name, dict(pool.resources)[GPU.key])
        used = self.usage([name for name, _ in queues.values()])
        found = []
        for work in played:
            if work.pool not in queues:
                continue
            queue, entry = queues[work.pool]
            held = used.get(queue)
            reasons = judged(work, queue, entry, held.allocated_gpu if held else 0.0)
            found.append(
                Workload(
                    namespace=work.namespace,
                    name=work.name,
                    pool=work.pool,
                    queue=queue,
                    gpus=work.gpus,
                    running=not reasons,
                    since=work.created,
                    preemptible=work.preemptible,
                    reasons=reasons,
                    group=f"pg-{work.name}-x-{work.namespace}-x-{spec.vcluster_name}",
                )
            )
        found.extend(self._demand(spec, queues, used))
        found.sort(key=lambda w: (w.running, w.since, w.namespace, w.name))
        return found

    def _demand(
        self,
        spec: TeamSpec,
        queues: Mapping[str, tuple[str, ResourceQuota]],
        used: Mapping[str, QueueUsage],
    ) -> list[Workload]:
        """What the simulated demand holds in each of the team's queues, as one running
        workload each (namespace ``simulated``): the figures the gauges show."""
        now = datetime.now(UTC)
        with self._lock:
            made = self._objects.get((Step.QUEUE, spec.team))
        since = now - timedelta(seconds=time.monotonic() - made.ready_at) if made else now
        found = []
        for value, (queue, _) in queues.items():
            held = used.get(queue)
            if held is None or held.allocated_gpu <= 0:
                continue
            found.append(
                Workload(
                    namespace="simulated",
                    name=f"demand-{value or 'default'}",
                    pool=value,
                    queue=queue,
                    gpus=held.allocated_gpu,
                    running=True,
                    since=since,
                    preemptible=True,
                )
            )
        return found

    def evictions(self, spec: TeamSpec) -> list[Eviction]:
        self._slow_call()
        with self._lock:
            return sorted(self._evicted.get(spec.team, ()), key=lambda e: e.at, reverse=True)

    def _play_example(self, now: datetime) -> None:
        """The example org's work: nlp waits with a non-preemptible 0.5-GPU fine-tune
        above its 0.33 guarantee, and had a sweep reclaimed by vision 40 minutes ago."""
        self._played["nlp"] = [
            PlayedWorkload(
                "default",
                "finetune-13b",
                gpus=0.5,
                preemptible=False,
                created=now - timedelta(minutes=12),
            )
        ]
        at = now - timedelta(minutes=40)
        self._evicted["nlp"] = [
            Eviction(
                uid="example-eviction-nlp-sweep-3",
                group="pg-sweep-3-x-default-x-nlp",
                namespace="default",
                name="sweep-3",
                at=at,
                action="reclaim",
                pods=1,
                by_namespace="vcluster-vision",
                gpus=0.67,
                started=at - timedelta(hours=2, minutes=30),
                queues=(
                    QueueFigures(
                        "team-nlp", allocated=1.0, deserved=0.33, fair_share=0.33, priority=100
                    ),
                    QueueFigures(
                        "team-vision", allocated=0.0, deserved=0.33, fair_share=0.5, priority=100
                    ),
                ),
            )
        ]

    def credential_accounts(self, spec: TeamSpec) -> list[Account]:
        with self._lock:
            self.calls += 1
            return [
                Account(name, held.cluster_role, held.created_at, held.uid)
                for name, held in self._accounts.get(spec.team, {}).items()
            ]

    def revoke_credentials(
        self, spec: TeamSpec, accounts: Collection[str], *, uids: Mapping[str, str] | None = None
    ) -> None:
        with self._lock:
            self.calls += 1
            held = self._accounts.get(spec.team, {})
            for name in accounts:
                if name in held and (uids is None or uids.get(name) == held[name].uid):
                    held.pop(name)

    def token_works(self, team: str, token: str) -> bool:
        """What the vCluster's API server would answer for this token: valid while its
        account exists and it has not expired."""
        now = datetime.now(UTC)
        with self._lock:
            return any(
                token in held.tokens and held.tokens[token] > now
                for held in self._accounts.get(team, {}).values()
            )

    def oidc_kubeconfig(
        self, spec: TeamSpec, person: Person, *, issuer: str, client_id: str
    ) -> str:
        self._vcluster(spec)
        return f"# {SIMULATED_NOTICE}\n" + kubeconfigs.oidc_kubeconfig(
            team=spec.team,
            person=person,
            server=f"https://{spec.team}.vcluster.simulated.invalid",
            ca_data=None,
            issuer=issuer,
            client_id=client_id,
        )

    # --- usage -------------------------------------------------------------------------

    def usage(self, queue_names: list[str]) -> dict[str, QueueUsage]:
        """Believable, changing usage: each queue's demand follows its own slow wave, and
        the simulated cluster (``cluster_gpus``, else the pool) is divided as KAI divides
        it (the portal's own fair-share calculator, checked against KAI's answers), each
        queue using its fair share up to its limit and demand: allocations never add up
        to more than the cluster has, and the demo shows the numbers the calculator
        explains."""
        now = time.time()
        with self._lock:
            columns = self._columns_locked()
            pinned = dict(self._pinned)
            smallest = dict(self._smallest)
        if columns is None:
            return {}
        asked = columns.demand(now)
        used = _share(columns, asked, self._total(columns))
        at = columns.at
        wanted = [name for name in queue_names if name in at]
        rows = [at[name] for name in wanted]
        # Rounded down so that the sum never exceeds what is divided.
        allocated = (np.floor(used[rows] * 100 + 1e-6) / 100).tolist()
        requested = [round(want, 2) for want in asked[rows].tolist()]  # as Python rounds
        found = {
            name: QueueUsage(
                allocated_gpu=held,
                requested_gpu=want,
                sampled_at=now,
                smallest_waiting=smallest.get(name),
            )
            for name, held, want in zip(wanted, allocated, requested, strict=True)
        }
        for name, (held, want) in pinned.items():
            if name in found and columns.specs[name].team not in self._asleep:
                found[name] = replace(
                    found[name],
                    allocated_gpu=math.floor(held * 100 + 1e-6) / 100,
                    requested_gpu=round(want, 2),
                )
        rest = [name for name in queue_names if name not in found]
        if rest:
            found.update(self._pool_usage(rest, now, smallest))
        return found

    def _pool_usage(
        self, names: list[str], now: float, smallest: Mapping[str, float]
    ) -> dict[str, QueueUsage]:
        """The teams' queues in the other pools: each pool divided on its own, its nodes'
        GPUs among its org queue's teams (a pool lends nothing to another)."""
        with self._lock:
            pools = self._pool_columns_locked()
        gpus_of = {value: gpus for value, _product, gpus in self.node_pool_specs}
        found: dict[str, QueueUsage] = {}
        for value, columns in pools.items():
            wanted = [name for name in names if name in columns.at]
            if not wanted:
                continue
            asked = columns.demand(now)
            used = _share(columns, asked, gpus_of.get(value, columns.pool))
            for name in wanted:
                row = columns.at[name]
                found[name] = QueueUsage(
                    allocated_gpu=math.floor(float(used[row]) * 100 + 1e-6) / 100,
                    requested_gpu=round(float(asked[row]), 2),
                    sampled_at=now,
                    smallest_waiting=smallest.get(name),
                )
        return found

    def _pool_columns_locked(self) -> dict[str, _QueueColumns]:
        """Per other pool (its label value), its teams' queues as columns (the caller
        holds the lock)."""
        specs = self._specs_locked()
        if self._pool_columns is not None and self._pool_columns[0] is specs:
            return self._pool_columns[1]
        by_pool: dict[str, dict[str, TeamSpec]] = {}
        for spec in specs.values():
            for pool in spec.pools:
                by_pool.setdefault(pool.label_value, {})[pool.queue_name] = replace(
                    spec,
                    queue_name=pool.queue_name,
                    parent_queue=pool.parent_queue,
                    resources=pool.resources,
                    org_resources=pool.org_resources,
                    pools=(),
                )
        built = {value: _QueueColumns.of(queues, self._asleep) for value, queues in by_pool.items()}
        self._pool_columns = (specs, built)
        return built

    def _specs_locked(self) -> dict[str, TeamSpec]:
        """Every queue's spec by name (the caller holds the lock; the dict is not to be
        changed: it is kept until an object changes)."""
        if self._queue_specs is None:
            self._queue_specs = {
                obj.spec.queue_name: obj.spec
                for (step, _), obj in self._objects.items()
                if step == Step.QUEUE
            }
        return self._queue_specs

    def _columns_locked(self) -> _QueueColumns | None:
        """Every queue's figures as columns, made again with the specs (the caller holds
        the lock); None without queues."""
        specs = self._specs_locked()
        if not specs:
            return None
        if self._columns is None or self._columns.specs is not specs:
            self._columns = _QueueColumns.of(specs, self._asleep)
        return self._columns

    def _total(self, columns: _QueueColumns) -> float:
        return columns.pool if self.cluster_gpus is None else self.cluster_gpus

    def node_pools(self, label_key: str) -> list[NodePool]:
        """The default pool (the simulated cluster's GPUs, on one node) and the pools the
        backend was given, one node each, every one served by a scheduler shard."""
        with self._lock:
            columns = self._columns_locked()
        default = self.cluster_gpus if self.cluster_gpus is not None else None
        if default is None:
            default = columns.pool if columns is not None else 0.0
        found = [NodePool("", "NVIDIA-H100-80GB-HBM3", default, 1, shard=True)]
        found += [
            NodePool(value, product, gpus, 1, shard=True)
            for value, product, gpus in self.node_pool_specs
        ]
        return found

    def cluster_top(self, pool: str = "") -> ClusterTop | None:
        """The simulated cluster's shard for ``pool`` (a label value; "" the default):
        its GPUs and the org's queue there, the only top-level one."""
        with self._lock:
            columns = self._columns_locked() if not pool else self._pool_columns_locked().get(pool)
        if columns is None:
            return None
        spec = columns.first
        gpus = {value: gpus for value, _product, gpus in self.node_pool_specs}
        total = self._total(columns) if not pool else gpus.get(pool, columns.pool)
        demand = float(np.add.accumulate(columns.demand(time.time()))[-1])
        org = TopQueue(
            name=spec.parent_queue,
            quota=spec.org_gpu.quota,
            limit=spec.org_gpu.limit,
            weight=spec.org_gpu.over_quota_weight,
            priority=100,
            requested=round(demand, 2),
        )
        return ClusterTop(gpus=total, queues=(org,))


@dataclass(frozen=True)
class _QueueColumns:
    """The simulated queues as columns, in the specs' order (made once per specs: the
    usage read every few seconds computes over arrays, not 10,000 specs one by one)."""

    specs: dict[str, TeamSpec]
    at: dict[str, int]  # queue name -> row
    first: TeamSpec
    pool: float  # the org's pool: its queue's guarantee
    quota: npt.NDArray[np.float64]
    limit: npt.NDArray[np.float64]
    weight: npt.NDArray[np.float64]
    priority: npt.NDArray[np.int64]
    scale: npt.NDArray[np.float64]  # 1.2 x the limit (0 where unlimited)
    phase: npt.NDArray[np.float64]
    period: npt.NDArray[np.float64]

    @classmethod
    def of(cls, specs: dict[str, TeamSpec], asleep: Collection[str] = ()) -> _QueueColumns:
        """``asleep``: the teams whose vCluster is paused (no pods: no demand)."""
        names = list(specs)
        gpu = [specs[name].gpu for name in names]
        waves = [_wave(name) for name in names]
        limit = np.array([g.limit for g in gpu], dtype=np.float64)
        return cls(
            specs=specs,
            at={name: i for i, name in enumerate(names)},
            first=specs[names[0]],
            pool=max(spec.org_gpu.quota for spec in specs.values()),
            quota=np.array([g.quota for g in gpu], dtype=np.float64),
            limit=limit,
            weight=np.array([g.over_quota_weight for g in gpu], dtype=np.float64),
            priority=np.array([specs[name].priority for name in names], dtype=np.int64),
            scale=np.maximum(0.0, limit)
            * 1.2
            * np.array([specs[name].team not in asleep for name in names], dtype=np.float64),
            phase=np.array([phase for phase, _ in waves], dtype=np.float64),
            period=np.array([period for _, period in waves], dtype=np.float64),
        )

    def demand(self, now: float) -> npt.NDArray[np.float64]:
        """Each queue's demand in GPUs: a slow wave between idle and 1.2 x its limit."""
        wave = 0.5 + 0.5 * np.sin(2 * math.pi * now / self.period + self.phase)
        demand: npt.NDArray[np.float64] = self.scale * wave
        return demand


@functools.lru_cache(maxsize=1 << 16)
def _wave(queue_name: str) -> tuple[float, int]:
    """The phase and period (seconds) of a queue's wave, fixed by its name."""
    seed = int(hashlib.sha256(queue_name.encode()).hexdigest()[:8], 16)
    return (seed % 1000) / 1000 * 2 * math.pi, 240 + seed % 180


def _share(
    columns: _QueueColumns, asked: npt.NDArray[np.float64], total: float
) -> npt.NDArray[np.float64]:
    """Each queue's fair share (KAI's division, in creation order: the cluster's ``total``
    GPUs to the org's queue, its share to the teams), used up to its limit and demand.
    The teams' level is divided over columns (the same doubles as the queue-by-queue
    division, a fraction of its time at thousands of teams)."""
    spec, limit = columns.first, columns.limit
    org = fairshare.QueueInput(
        name=spec.parent_queue,
        quota=spec.org_gpu.quota,
        limit=spec.org_gpu.limit,
        weight=spec.org_gpu.over_quota_weight,
        # A parent asks for the sum of its children's requests, one after another.
        demand=float(np.add.accumulate(asked)[-1]),
    )
    level = fairshare.Columns(
        quota=columns.quota,
        limit=limit,
        weight=columns.weight,
        priority=columns.priority,
        request=asked,
        usage=np.zeros(len(asked)),
    )
    fair = fairshare.divide_columns(fairshare.divide(total, [org])[org.name], level)
    used = np.maximum(0.0, np.minimum(fair, fairshare.can_use_columns(limit, asked)))
    return used


def _queue_of(spec: TeamSpec) -> TeamSpec:
    """What of a spec the team's queues are made of (its sleep, template and such are
    not: a queue does not differ from the approved quota when the cluster sleeps)."""
    return replace(
        spec,
        template="",
        template_values="",
        template_version_id=None,
        template_installed=True,
        template_manifests="",
        template_charts=(),
        template_repair=False,
        sleep=Sleep.AWAKE,
    )


def _describe(step: Step, spec: TeamSpec) -> str:
    return {
        Step.QUEUE: f"queue {spec.queue_name} under {spec.parent_queue}",
        Step.NAMESPACE: f"namespace {spec.namespace}",
        Step.VCLUSTER: f"vCluster {spec.vcluster_name}",
        Step.ADMISSION_POLICY: f"admission policy pinning {spec.namespace} to {spec.queue_name}",
        Step.KUBECONFIG: f"kubeconfig secret vc-{spec.vcluster_name}",
    }[step]
