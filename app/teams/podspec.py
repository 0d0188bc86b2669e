"""The ready-to-paste pod specs a team runs inside its vCluster."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.models import Pool, Team
from app.core.quantities import format_hundredths


@dataclass(frozen=True)
class PodExample:
    key: str  # an id for the page
    title: str
    note: str
    yaml: str


def example_pods(
    team: Team,
    *,
    queue_label: str,
    pool_label: str = "",
    pools: Sequence[tuple[Pool, int]] = (),
) -> list[PodExample]:
    """A whole-GPU pod, and for a fractional guarantee a GPU-share pod beside it; and for
    each other pool the team holds quota in (``pools``: each with the team's GPU
    guarantee there), a pod sent there: its queue in that pool and the pool's label, the
    pair the host's policy admits."""
    quota = team.quota.gpu.guarantee or 0
    examples = []
    if quota % 100 > 0:
        examples.append(_fraction_pod(team, queue_label, quota))
    examples.append(_whole_pod(team, queue_label, quota))
    examples.extend(_pool_pod(team, queue_label, pool_label, pool, held) for pool, held in pools)
    return examples


def _fraction_pod(team: Team, queue_label: str, quota: int) -> PodExample:
    share = format_hundredths(quota % 100 if quota > 100 else quota)
    return PodExample(
        key="fraction",
        title=f"A {share} share of one GPU",
        note="Needs KAI installed with GPU sharing (global.gpuSharing=true, off by "
        "default): without it KAI's binder refuses gpu-fraction pods.",
        yaml=_pod(
            team,
            queue_label=queue_label,
            annotations=f'  annotations:\n    gpu-fraction: "{share}"\n',
        ),
    )


def _whole_pod(team: Team, queue_label: str, quota: int) -> PodExample:
    whole = max(1, quota // 100)
    return PodExample(
        key="whole",
        title=f"{whole} whole GPU{'s' if whole > 1 else ''}",
        note=(
            f"Whole-GPU pods only use whole GPUs: with a guarantee of "
            f"{format_hundredths(quota)} GPU this pod runs on borrowed capacity, which "
            "KAI may reclaim when other teams need their guarantee."
        )
        if quota % 100
        else "Runs within the guarantee.",
        yaml=_pod(team, queue_label=queue_label, limits=_limits(whole)),
    )


def _pool_pod(team: Team, queue_label: str, pool_label: str, pool: Pool, held: int) -> PodExample:
    count = max(1, held // 100)
    kind = f" ({pool.gpu_type})" if pool.gpu_type else ""
    return PodExample(
        key=f"pool-{pool.name}",
        title=f"{count} whole GPU{'s' if count > 1 else ''} in pool {pool.name}{kind}",
        note=f"Runs on the pool's nodes, in your queue there (guarantee "
        f"{format_hundredths(held)} GPU): the queue and the pool label go together, "
        "and the host refuses a pod with one but not the other.",
        yaml=_pod(
            team,
            queue_label=queue_label,
            queue=team.queue_in(pool),
            extra_label=f"    {pool_label}: {pool.label_value}\n",
            name=f"{team.name}-{pool.name}-gpu-check",
            limits=_limits(count),
        ),
    )


def _limits(count: int) -> str:
    return f"      resources:\n        limits:\n          nvidia.com/gpu: {count}\n"


def _pod(
    team: Team,
    *,
    queue_label: str,
    annotations: str = "",
    limits: str = "",
    queue: str = "",
    extra_label: str = "",
    name: str = "",
) -> str:
    return (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        f"  name: {name or team.name + '-gpu-check'}\n"
        "  labels:\n"
        f"    {queue_label}: {queue or team.queue_name}\n"
        f"{extra_label}"
        f"{annotations}"
        "spec:\n"
        "  schedulerName: kai-scheduler\n"
        "  tolerations:\n"
        "    - key: nvidia.com/gpu\n"
        "      operator: Exists\n"
        "      effect: NoSchedule\n"
        "  nodeSelector:\n"
        '    nvidia.com/gpu.present: "true"\n'
        "  containers:\n"
        "    - name: cuda\n"
        "      image: nvidia/cuda:12.4.0-base-ubuntu22.04\n"
        '      command: ["bash", "-c", "nvidia-smi; sleep infinity"]\n'
        f"{limits}"
    )
