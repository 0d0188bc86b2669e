"""The portal's own Prometheus metrics.

Counters and histograms live in one registry for the process (every portal app in it
adds to the same figures); figures read from the database at scrape time (teams by
state) come from a collector each app registers in its own registry, which also exposes
the process-wide ones. Names start with ``portal_``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# No *_created series: they double the output for no use here.
disable_created_metrics()  # type: ignore[no-untyped-call]
PROCESS = CollectorRegistry(auto_describe=True)

HTTP_REQUESTS = Counter(
    "portal_http_requests_total",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
    registry=PROCESS,
)
HTTP_LATENCY = Histogram(
    "portal_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer, by method and route template.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=PROCESS,
)
RECONCILE_PASS = Histogram(
    "portal_reconcile_pass_duration_seconds",
    "Duration of one provisioning pass over every due team (passes that found work).",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
    registry=PROCESS,
)
BACKEND_ERRORS = Counter(
    "portal_backend_errors_total",
    "Failed cluster calls during provisioning, by the step that failed.",
    ["step"],
    registry=PROCESS,
)
STEADY_RECHECKS = Counter(
    "portal_provisioning_steady_rechecks_total",
    "Ready teams re-checked for drift and found exactly as recorded (written back together).",
    registry=PROCESS,
)
RETRIES = Counter(
    "portal_provisioning_retries_total",
    "Provisioning passes that failed and were scheduled to be tried again.",
    registry=PROCESS,
)
CLUSTER_READS = Counter(
    "portal_cluster_read_cache_total",
    "Reads of the cluster's GPU usage, by whether the shared cache answered.",
    ["result"],
    registry=PROCESS,
)
DELIVERIES = Counter(
    "portal_notification_deliveries_total",
    "Attempts to deliver a notification, by channel (email, slack, json) and outcome.",
    ["channel", "outcome"],
    registry=PROCESS,
)
DELIVERY_SECONDS = Histogram(
    "portal_notification_delivery_seconds",
    "Time one successful delivery took (the SMTP conversation or the webhook post).",
    ["channel"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=PROCESS,
)
LEASES_RELEASED = Counter(
    "portal_worker_leases_released_total",
    "Team leases this process gave back at shutdown, for another replica to take at once.",
    registry=PROCESS,
)
SLEEPS = Counter(
    "portal_vcluster_sleeps_total",
    "Team vClusters seen paused (by the portal's policy, a person, or by hand).",
    registry=PROCESS,
)
WAKES = Counter(
    "portal_vcluster_wakes_total",
    "Wakes asked of sleeping team vClusters, by what asked (person, kubeconfig, api).",
    ["cause"],
    registry=PROCESS,
)
WAKE_SECONDS = Histogram(
    "portal_vcluster_wake_seconds",
    "From a wake asked to the vCluster's control plane answering again.",
    buckets=(1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300),
    registry=PROCESS,
)


class _Process(Collector):
    """Exposes the process-wide metrics inside an app's registry."""

    def collect(self) -> Iterable[Metric]:
        return PROCESS.collect()


class TeamsByStatus(Collector):
    """``portal_teams{status=…}``, counted in the database when scraped."""

    def __init__(self, count: Callable[[], dict[str, int]], statuses: Iterable[str]) -> None:
        self.count = count
        self.statuses = tuple(statuses)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("portal_teams", "Teams by status.", labels=["status"])
        counts = self.count()
        for status in self.statuses:
            family.add_metric([status], counts.get(status, 0))
        yield family


class Asleep(Collector):
    """``portal_vclusters_asleep``: team vClusters paused now (the ``asleep`` count)."""

    def __init__(self, count: Callable[[], dict[str, int]]) -> None:
        self.count = count

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("portal_vclusters_asleep", "Team vClusters asleep now.")
        family.add_metric([], self.count().get("asleep", 0))
        yield family


def app_registry(*collectors: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Process())
    for collector in collectors:
        registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
