"""The ready-to-paste pod spec a team runs inside its vCluster."""

from __future__ import annotations

from app.core.models import Team
from app.core.quantities import format_hundredths


def example_pod(team: Team) -> str:
    """A pod that KAI schedules in the team's queue, with a GPU share that fits its quota."""
    quota = team.gpu_quota_centi
    if 0 < quota < 100:
        gpu = f'  annotations:\n    gpu-fraction: "{format_hundredths(quota)}"\n'
        limits = ""
    else:
        gpu = ""
        whole = max(1, quota // 100)
        limits = f"      resources:\n        limits:\n          nvidia.com/gpu: {whole}\n"
    return (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        f"  name: {team.name}-gpu-check\n"
        "  labels:\n"
        f"    kai.scheduler/queue: {team.queue_name}\n"
        f"{gpu}"
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
