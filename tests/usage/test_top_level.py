"""KAI's top level in every figure: the cluster's GPUs divided among every top-level
queue (the org's pool is its queue's guarantee there), time-based fairshare, and what a
waiting pod can expect."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kubernetes import client

from app.adapters.k8s.backend import pod_gpus
from app.usage.service import GpuShare, Model, TeamQuota, shares_for
from app.usage.sources import ClusterTop, QueueUsage, TopQueue

PARENT = "ml-org"


def _team(i: int, name: str, quota: int, limit: int = 100) -> TeamQuota:
    return TeamQuota(i, name, quota, limit, 100, 100, created=1_000 + i)


TEAMS = [
    _team(1, "nlp", 33),
    _team(2, "vision", 33),
    _team(3, "recommender", 34),
    _team(4, "audio", 0),
]
BUSY = {f"team-{t.name}": QueueUsage(1.0, 1.0) for t in TEAMS}


def _top(gpus: float, *, org_limit: float = -1, requested: float = 4) -> ClusterTop:
    return ClusterTop(
        gpus=gpus,
        queues=(
            TopQueue(PARENT, 1, org_limit, 1, 100, requested, created=900),
            TopQueue("default-parent-queue", 0, -1, 1, 100, 0, created=800),
        ),
    )


def _fair(model: Model, pool_centi: int = 100) -> dict[str, float | None]:
    shares = shares_for(TEAMS, BUSY, pool_centi=pool_centi, parent=PARENT, model=model)
    return {t.name: shares[t.id].fair_now for t in TEAMS}


def test_a_cluster_larger_than_the_pool_is_divided_as_kai_divides_it() -> None:
    """The design source's teams and a fourth, each running a 1-GPU pod, on 1 + 4 + 4
    GPUs with a pool of 1: the real KAI v0.17.0 (the step-7 run) binds each pod and
    reports fair shares 1 / 1 / 1 / 1 (and 4 for the org). Dividing only the pool gave
    0.33 / 0.33 / 0.34 / 0 (their guarantees)."""
    assert _fair(Model(top=_top(9))) == {"nlp": 1, "vision": 1, "recommender": 1, "audio": 1}
    assert _fair(Model()) == {"nlp": 0.33, "vision": 0.33, "recommender": 0.34, "audio": 0}


def test_an_org_limited_to_its_pool_divides_the_pool() -> None:
    fair = _fair(Model(top=_top(9, org_limit=1)))
    assert fair == {"nlp": 0.33, "vision": 0.33, "recommender": 0.34, "audio": 0}


def test_a_pool_larger_than_the_cluster_is_not_usable() -> None:
    """A pool of 12 on a cluster of 2 GPUs, four teams each asking for 1 and holding
    none: KAI's arithmetic deserves the org min(12, 4) = 4 (it does not cap a guarantee
    by the cluster), but no team can use more than the 2 GPUs that exist."""
    waiting = {f"team-{t.name}": QueueUsage(0.0, 1.0) for t in TEAMS}
    shares = shares_for(TEAMS, waiting, pool_centi=1200, parent=PARENT, model=Model(top=_top(2)))
    assert sum(s.fair_now or 0 for s in shares.values()) == pytest.approx(4)
    assert all((s.usable_now or 0) <= 2 for s in shares.values())
    held = {**waiting, "team-nlp": QueueUsage(2.0, 3.0)}
    shares = shares_for(TEAMS, held, pool_centi=1200, parent=PARENT, model=Model(top=_top(2)))
    assert shares[2].usable_now == 0  # nlp holds both GPUs
    assert Model(top=_top(2)).cluster_gpus == 2
    assert Model().cluster_gpus is None


def test_past_usage_moves_the_share_and_the_page_can_say_from_what() -> None:
    """kValue 1 and nlp used half the cluster lately: nlp gets less of what is idle."""
    teams = [_team(1, "nlp", 0, 400), _team(2, "vision", 0, 400)]
    usage = {"team-nlp": QueueUsage(0, 4), "team-vision": QueueUsage(0, 4)}
    model = Model(
        top=ClusterTop(4, (TopQueue(PARENT, 4, -1, 1, 100, 8),)),
        k_value=1.0,
        usage={"team-nlp": 0.5, "team-vision": 0.0},
    )
    shares = shares_for(teams, usage, pool_centi=400, parent=PARENT, model=model)
    assert (shares[1].fair_now, shares[2].fair_now) == (1, 3)
    assert (shares[1].fair_without_history, shares[2].fair_without_history) == (2, 2)
    plain = shares_for(
        teams, usage, pool_centi=400, parent=PARENT, model=Model(top=model.top, k_value=1.0)
    )
    assert plain[1].fair_without_history is None


def test_a_whole_gpu_pod_above_the_fair_share_is_not_promised_a_start() -> None:
    """A guarantee of 0.5, nothing running, a 1-GPU pod waiting: KAI reclaims only up to
    the fair share (0.5), so the pod waits for an idle GPU; a 0.5-GPU pod would start."""
    whole = GpuShare(0.5, 1, 0.0, 1.0, 1, fair_now=0.5, usable_now=0.5, smallest_waiting=1.0)
    assert whole.reclaim_stops_at == 0.5
    half = GpuShare(0.5, 1, 0.0, 0.5, 1, fair_now=0.5, usable_now=0.5, smallest_waiting=0.5)
    assert half.reclaim_stops_at is None
    unknown = GpuShare(0.5, 1, 0.0, 1.0, 1, fair_now=0.5, usable_now=0.5)
    assert unknown.reclaim_stops_at is None


def test_a_pods_gpus_are_its_whole_gpus_or_its_fraction() -> None:
    def pod(annotations: dict[str, str], limits: dict[str, str] | None) -> client.V1Pod:
        resources = client.V1ResourceRequirements(limits=limits)
        return client.V1Pod(
            metadata=client.V1ObjectMeta(annotations=annotations),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", resources=resources)]),
        )

    assert pod_gpus(pod({}, {"nvidia.com/gpu": "2"})) == 2
    assert pod_gpus(pod({"gpu-fraction": "0.33"}, None)) == 0.33
    assert pod_gpus(pod({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, None)) == 1
    assert pod_gpus(pod({}, {"cpu": "1"})) == 0
    assert pod_gpus(SimpleNamespace(metadata=None, spec=None)) == 0


def test_a_tie_in_the_same_second_falls_to_the_queues_uid_as_in_kai() -> None:
    """Two queues created in the same second, with the same set-aside part: KAI gives
    the leftover to the smaller uid, whatever the names."""
    teams = [
        TeamQuota(1, "alpha", 0, 100, 100, 100, created=5),
        TeamQuota(2, "beta", 0, 100, 100, 100, created=5),
    ]
    usage = {
        "team-alpha": QueueUsage(0, 1, created=5, uid="f0"),
        "team-beta": QueueUsage(0, 1, created=5, uid="0a"),
    }
    shares = shares_for(teams, usage, pool_centi=100, parent=PARENT)
    assert (shares[1].fair_now, shares[2].fair_now) == (0, 1)
    by_name = {k: QueueUsage(0, 1, created=5) for k in usage}
    shares = shares_for(teams, by_name, pool_centi=100, parent=PARENT)
    assert (shares[1].fair_now, shares[2].fair_now) == (1, 0)


def _busy(model: Model, pool_centi: int = 100) -> dict[str, tuple[float | None, float | None]]:
    shares = shares_for(TEAMS, BUSY, pool_centi=pool_centi, parent=PARENT, model=model)
    return {t.name: (shares[t.id].within_pool, shares[t.id].if_all_busy) for t in TEAMS}


def test_guaranteed_by_the_pool_is_the_pool_alone_divided() -> None:
    """Two worlds of "if every team were busy" on a cluster of 9 GPUs and a pool of 1:
    with the rest of the cluster idle KAI lends the org every idle GPU (each team gets
    its limit of 1); with the rest of the cluster busy too the org keeps its pool, and
    the pool's GPU is divided — exactly the division of a cluster that is only the
    pool. Where the cluster is only the pool the two are one figure."""
    worlds = _busy(Model(top=_top(9)))
    alone = _busy(Model())
    assert {name: busy for name, (_, busy) in worlds.items()} == dict.fromkeys(worlds, 1.0)
    assert {name: within for name, (within, _) in worlds.items()} == {
        name: busy for name, (_, busy) in alone.items()
    }
    assert [within for within, _ in worlds.values()] == [0.33, 0.33, 0.34, 0.0]
    assert all(within == busy for within, busy in alone.values())
    # A larger pool moves what it guarantees even where the idle cluster's does not.
    grown = _busy(Model(top=_top(9)), pool_centi=300)
    assert [busy for _, busy in grown.values()] == [1.0] * 4
    grown_alone = _busy(Model(), pool_centi=300)
    assert [within for within, _ in grown.values()] == [busy for _, busy in grown_alone.values()]
    assert [within for within, _ in grown.values()] != [within for within, _ in worlds.values()]


def test_busy_means_the_rest_of_the_cluster_idle_whatever_it_asks_now() -> None:
    """Another tenant's queue asking for the whole cluster now changes KAI's fair share
    now, not the figure named "if every team were busy and the rest of the cluster
    idle"; the GPUs idle in the cluster are what no queue holds or asks for."""
    crowded = ClusterTop(
        gpus=9,
        queues=(
            TopQueue(PARENT, 1, -1, 1, 100, 4, created=900),
            TopQueue("other-org", 4, -1, 1, 100, 9, created=800),
        ),
    )
    quiet = ClusterTop(gpus=9, queues=(crowded.queues[0],))
    assert _busy(Model(top=crowded)) == _busy(Model(top=quiet))
    assert _fair(Model(top=crowded)) != _fair(Model(top=quiet))
    shares = shares_for(TEAMS, BUSY, pool_centi=100, parent=PARENT, model=Model(top=quiet))
    assert shares[1].idle_elsewhere == 5.0  # 9 GPUs, 4 held by the org's teams
    crowded_shares = shares_for(
        TEAMS, BUSY, pool_centi=100, parent=PARENT, model=Model(top=crowded)
    )
    assert crowded_shares[1].idle_elsewhere == 0.0
