"""Optional: read KAI's own numbers from Prometheus instead of computing them.

KAI exports `<prefix>_queue_allocated_gpus` (its queue controller) and
`<prefix>_queue_fair_share_gpu` (its scheduler), prefix `kai` by default (`runai` up to
v0.4.x). Both carry `queue_name`, but not the same name in it: the queue controller
writes the queue's metadata.name, the scheduler its displayName when it has one. Since
v0.15/v0.16 both also carry `queue_metadata_name`, which is what the portal matches on;
`queue_name` only for a KAI that has no such label. When a Prometheus URL is configured
the gauges use those, and `<prefix>_queue_gpu_usage` (the scheduler's, per queue) is the
past usage that time-based fairshare weighs into every figure the portal computes.
"""

from __future__ import annotations

import httpx

from app.usage.sources import KaiQueueMetrics, MetricsError

ALLOCATED = "queue_allocated_gpus"
FAIR_SHARE = "queue_fair_share_gpu"
USAGE = "queue_gpu_usage"  # time-based fairshare's input, as the scheduler used it


class PrometheusError(MetricsError):
    pass


class PrometheusSource:
    def __init__(self, url: str, *, prefix: str = "kai", timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.prefix = prefix
        self.timeout = timeout

    def _vector(self, metric: str) -> tuple[dict[str, float], bool]:
        try:
            response = httpx.get(
                f"{self.url}/api/v1/query", params={"query": metric}, timeout=self.timeout
            )
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise PrometheusError(f"Prometheus could not be queried for {metric}: {exc}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"Prometheus refused the query {metric}: {body.get('error')}")
        result = body.get("data", {}).get("result", [])
        by_metadata = any("queue_metadata_name" in i.get("metric", {}) for i in result)
        label = "queue_metadata_name" if by_metadata else "queue_name"
        values: dict[str, float] = {}
        for item in result:
            name = item.get("metric", {}).get(label)
            if name:
                values[name] = float(item["value"][1])
        return values, by_metadata

    def read(self) -> KaiQueueMetrics:
        allocated, a_meta = self._vector(f"{self.prefix}_{ALLOCATED}")
        fair, f_meta = self._vector(f"{self.prefix}_{FAIR_SHARE}")
        if a_meta != f_meta and allocated and fair:
            raise PrometheusError(
                "KAI's allocation and fair-share series are labelled differently "
                "(queue_metadata_name on one only): run one KAI version"
            )
        usage, u_meta = self._vector(f"{self.prefix}_{USAGE}")
        by_metadata = a_meta or f_meta
        if usage and u_meta != by_metadata:
            usage = {}  # labelled otherwise than the rest: not matched to the wrong queue
        return KaiQueueMetrics(allocated, fair, by_metadata_name=by_metadata, usage=usage)
