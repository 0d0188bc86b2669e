"""Optional: read KAI's own numbers from Prometheus instead of computing them.

KAI's scheduler exports `<prefix>_queue_allocated_gpus` and `<prefix>_queue_fair_share_gpu`
(prefix `kai` by default, `runai` in the first release), labelled `queue_name` with the
queue's displayName when it has one. When a Prometheus URL is configured the gauges use
those.
"""

from __future__ import annotations

import httpx

from app.usage.sources import KaiQueueMetrics, MetricsError

ALLOCATED = "queue_allocated_gpus"
FAIR_SHARE = "queue_fair_share_gpu"


class PrometheusError(MetricsError):
    pass


class PrometheusSource:
    def __init__(self, url: str, *, prefix: str = "kai", timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.prefix = prefix
        self.timeout = timeout

    def _vector(self, metric: str) -> dict[str, float]:
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
        values: dict[str, float] = {}
        for item in body.get("data", {}).get("result", []):
            name = item.get("metric", {}).get("queue_name")
            if name:
                values[name] = float(item["value"][1])
        return values

    def read(self) -> KaiQueueMetrics:
        return KaiQueueMetrics(
            self._vector(f"{self.prefix}_{ALLOCATED}"), self._vector(f"{self.prefix}_{FAIR_SHARE}")
        )
