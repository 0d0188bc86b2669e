"""One settings class for the whole portal (environment prefix ``PORTAL_``)."""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass, fields
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_SECRET_KEY = "development-secret-key-change-me"  # noqa: S105 - refused outside development
PROJECT_ROOT = Path(__file__).resolve().parents[2]


LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


class ClusterBackendKind(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


_QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"


@dataclass(frozen=True)
class VClusterSettings:
    """How the portal installs and reaches each team's vCluster (``PORTAL_VCLUSTER_*``)."""

    installer: Literal["cli", "helm"]
    cli: str
    helm_cli: str
    chart_repo: str
    chart_version: str  # as the chart spells it (no leading v)
    image_registry: str
    telemetry: bool
    cpu_request: str
    memory_request: str
    memory_limit: str
    storage_size: str
    storage_class: str
    values_schema: str
    upgrade_timeout_seconds: float
    api_address: Literal["service", "exposed", "secret"]
    expose: Literal["LoadBalancer", "NodePort", "Ingress"]
    ingress_host: str
    node_address: str | None
    timeout_seconds: float


@dataclass(frozen=True)
class KubeconfigSettings:
    """Personal kubeconfigs (``PORTAL_KUBECONFIG_*``; not ``PORTAL_KUBECONFIG``, the host's)."""

    mode: Literal["token", "oidc"]
    ttl: str
    ttl_seconds: int
    max_ttl: str
    max_ttl_seconds: int
    admin_role: str
    lead_role: str
    member_role: str
    namespace: str
    sweep_seconds: float
    oidc_client_id: str  # empty: the portal's own client id


@dataclass(frozen=True)
class SmtpSettings:
    """The SMTP server notification e-mails go through (``PORTAL_SMTP_*``)."""

    host: str | None
    port: int
    security: Literal["starttls", "tls", "none"]
    ca_file: str | None
    username: str | None
    password: SecretStr | None
    sender: str  # PORTAL_SMTP_FROM
    timeout_seconds: float

    @property
    def enabled(self) -> bool:
        return bool(self.host)


@dataclass(frozen=True)
class OidcSettings:
    """The identity provider (``PORTAL_OIDC_*``)."""

    issuer: str | None
    discovery_url: str | None
    client_id: str
    client_secret: SecretStr
    scopes: str
    provider_name: str
    groups_claim: str
    admin_group: str
    team_group_pattern: str
    audience: str | None
    timeout_seconds: float


@dataclass(frozen=True)
class WorkerSettings:
    """The provisioning worker (``PORTAL_WORKER_*``, ``PORTAL_RETRY_*``)."""

    enabled: bool
    interval_seconds: float
    resync_seconds: float
    lease_seconds: float
    retry_base_seconds: float
    retry_max_seconds: float


def _group(settings: BaseSettings, group: type[Any], prefix: str, **given: Any) -> Any:
    """A frozen group of the settings named ``prefix + field`` (``given`` for the rest)."""
    names = [f.name for f in fields(group) if f.name not in given]
    return group(**{name: getattr(settings, prefix + name) for name in names}, **given)


class Settings(BaseSettings):
    """Everything the portal reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="PORTAL_", env_file=".env", extra="ignore")

    development: bool = Field(
        default=False,
        description=(
            "Development mode: enables the development sign-in (and says so on every "
            "page) and allows the default key. `make run` sets it."
        ),
    )
    template_reload: bool | None = Field(
        default=None,
        description=(
            "Re-read templates that changed on disk (one file check per include; a team "
            "page has about twenty). On in development, off otherwise; the benchmarks "
            "turn it off to measure what production serves."
        ),
        json_schema_extra={"shown_default": "development"},
    )
    secret_key: SecretStr = Field(
        default=SecretStr(DEFAULT_SECRET_KEY),
        description="Signs session cookies and CSRF tokens; at least 16 characters.",
        json_schema_extra={"shown_default": "built-in, development only"},
    )
    database_url: str = Field(
        default="sqlite:///./gpu-portal.db",
        description=(
            "SQLAlchemy URL: SQLite, or PostgreSQL as `postgresql+psycopg://user:pass@host/db`."
        ),
    )
    cluster_backend: ClusterBackendKind = Field(
        default=ClusterBackendKind.SIMULATED, description="`simulated` or `kubernetes`."
    )
    kubeconfig: str | None = Field(
        default=None,
        description="Kubeconfig for the host cluster (in a pod the in-cluster config is used).",
    )
    kube_context: str | None = Field(default=None, description="Context in that kubeconfig.")
    kube_service_account: str | None = Field(
        default=None,
        description=(
            "The portal's ServiceAccount (`namespace/name`), bound to "
            "`PORTAL_KUBE_TEAM_ROLE` in each team namespace."
        ),
    )
    kube_team_role: str = Field(
        default="gpu-portal-team-namespace",
        min_length=1,
        max_length=253,
        description=(
            "The ClusterRole the portal binds itself to in each team namespace (the "
            "chart's `<release>-team-namespace`)."
        ),
    )
    vcluster_installer: Literal["cli", "helm"] = Field(
        default="cli",
        description=(
            "Install vClusters with the `vcluster` CLI or with `helm upgrade --install` "
            "of the same chart."
        ),
    )
    vcluster_cli: str = Field(default="vcluster", description="The vcluster executable.")
    helm_cli: str = Field(
        default="helm",
        description="The helm executable (the helm installer, and the CLI runs it too).",
    )
    vcluster_chart_repo: str = Field(
        default="https://charts.loft.sh",
        description=(
            "Where the vCluster chart comes from: a chart repository (the public one or a "
            "mirror), `oci://registry/path` (holding chart `vcluster`), or the absolute "
            "path of a chart archive on the portal's disk. Checked at start."
        ),
    )
    vcluster_chart_version: str = Field(
        default="0.36.1",
        description=(
            "vCluster chart version (>= 0.21 keeps pod labels). Changing it upgrades "
            "every team, one at a time."
        ),
    )
    template_chart_sources: str = Field(
        default="",
        description=(
            "Where a cluster template's charts may come from, comma-separated: "
            "`oci://registry.example.org/charts`, `https://charts.example.org` (a source "
            "and everything below it; `http://` only if listed). Empty: any `https://` or "
            "`oci://` source whose host has public addresses only."
        ),
    )
    vcluster_image_registry: str = Field(
        default="",
        max_length=253,
        description=(
            "Registry serving the vCluster images "
            "(`controlPlane.advanced.defaultImageRegistry`); empty keeps the chart's."
        ),
    )
    vcluster_telemetry: bool = Field(
        default=False, description="Let vCluster control planes send telemetry to its vendor."
    )
    vcluster_cpu_request: str = Field(
        default="200m", description="CPU each vCluster control plane asks."
    )
    vcluster_memory_request: str = Field(
        default="256Mi", description="Memory each control plane asks."
    )
    vcluster_memory_limit: str = Field(
        default="4Gi", description="Memory limit of each control plane."
    )
    vcluster_storage_size: str = Field(
        default="5Gi", description="Size of each control plane's volume."
    )
    vcluster_storage_class: str = Field(
        default="",
        max_length=253,
        description="StorageClass of each control plane's volume; empty = the cluster's default.",
    )
    vcluster_values_schema: str = Field(
        default="",
        max_length=4096,
        description=(
            "The vCluster chart's values.schema.json (an absolute path), which cluster "
            "templates' vCluster values are checked against; empty = read from the chart "
            "archive, or pulled once with helm from the chart repository."
        ),
    )
    vcluster_upgrade_timeout_seconds: float = Field(
        default=900.0,
        gt=0,
        le=86400,
        description="An upgraded vCluster not ready after this long stops the rollout.",
    )
    vcluster_api_address: Literal["service", "exposed", "secret"] = Field(
        default="service",
        description=(
            "How the portal reaches a vCluster's API to issue kubeconfigs: `service`, "
            "`exposed` or `secret` (see "
            "[Personal kubeconfigs](docs/cluster.md#personal-kubeconfigs))."
        ),
    )
    kubeconfig_mode: Literal["token", "oidc"] = Field(
        default="token",
        description=(
            "`token` (personal ServiceAccount tokens) or `oidc` (sign-in through the "
            "identity provider)."
        ),
    )
    kubeconfig_ttl: str = Field(
        default="8h", description="Default lifetime of a downloaded kubeconfig (30m, 8h, 2d)."
    )
    kubeconfig_max_ttl: str = Field(
        default="7d", description="Longest lifetime a person may choose for a kubeconfig."
    )
    kubeconfig_max_live: int = Field(
        default=10,
        ge=1,
        le=1000,
        description=(
            "Most unexpired, unrevoked kubeconfigs one person may hold across all teams "
            "(each is a credential in a vCluster); one more is refused until one is "
            "revoked or expires."
        ),
    )
    kubeconfig_admin_role: str = Field(
        default="cluster-admin", description="ClusterRole inside a vCluster for portal admins."
    )
    kubeconfig_lead_role: str = Field(
        default="cluster-admin", description="ClusterRole inside a vCluster for team leads."
    )
    kubeconfig_member_role: str = Field(
        default="edit", description="ClusterRole inside a vCluster for team members."
    )
    kubeconfig_namespace: str = Field(
        default="gpu-portal-access",
        description="Namespace inside each vCluster for the per-person ServiceAccounts.",
    )
    kubeconfig_sweep_seconds: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description=(
            "How often every vCluster's accounts are compared with the people allowed "
            "(revocations apply at once besides)."
        ),
    )
    kubeconfig_oidc_client_id: str = Field(
        default="",
        description="`oidc` mode: the client kubectl signs in with.",
        json_schema_extra={"shown_default": "the portal's client id"},
    )
    vcluster_expose: Literal["LoadBalancer", "NodePort", "Ingress"] = Field(
        default="LoadBalancer",
        description="`LoadBalancer`, `NodePort` or `Ingress`.",
    )
    vcluster_ingress_host: str = Field(
        default="{team}.vcluster.example.org",
        description="Ingress mode: host of a team's API server.",
    )
    vcluster_node_address: str | None = Field(
        default=None, description="NodePort mode: the node address users connect to."
    )
    vcluster_timeout_seconds: float = Field(
        default=300.0, gt=0, le=3600, description="Time-out for one vcluster CLI call."
    )
    simulated_step_seconds: float = Field(
        default=1.5,
        ge=0,
        le=3600,
        description="Simulated backend: seconds each provisioning step takes.",
    )
    simulated_call_seconds: float = Field(
        default=0.0,
        ge=0,
        le=600,
        description=(
            "Simulated backend: seconds each cluster call blocks (a slow API server), to "
            "see leases held during a pass."
        ),
    )
    simulated_cluster_gpus: float | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description=(
            "GPUs of the simulated cluster, which KAI divides among its top-level queues "
            "(the org's pool is the org queue's guarantee there); unset: as many as the "
            "pool. `make run` simulates 2."
        ),
    )
    simulated_node_pools: str = Field(
        default="l40s=NVIDIA-L40S:4",
        description=(
            "Simulated backend: the node pools beside the default one, as "
            "`<label value>=<GPU type>:<GPUs>` separated by commas; empty: the default "
            "pool alone."
        ),
    )
    simulated_example_work: bool = Field(
        default=False,
        description=(
            "Simulated backend: play the example org's workloads (one of nlp's waits for "
            "KAI, one was reclaimed by vision). `make run` turns it on."
        ),
    )
    org_queue_gpu_limit: Literal["unlimited", "pool"] = Field(
        default="unlimited",
        description=(
            "The org queue's GPU limit: `unlimited` (-1, as the design source writes it: "
            "the org borrows idle GPUs of the whole cluster beyond its pool, and the "
            "figures divide the cluster as KAI does) or `pool` (KAI never gives the org "
            "more than its pool)."
        ),
    )
    kai_k_value: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "KAI's time-based fairshare weight (kValue); unset: the cluster's "
            "SchedulingShard `spec.kValue`, else KAI's default 1.0. It matters only with "
            "a usage database (`usageDBConfig`): each queue's past usage is read from "
            "`kai_queue_gpu_usage` through `PORTAL_PROMETHEUS_URL`."
        ),
    )
    worker_enabled: bool = Field(
        default=True,
        description=(
            "Run the provisioning worker (and the kubeconfig sweeper) in this process "
            "(off on web replicas when `gpu-portal work` runs apart)."
        ),
    )
    worker_interval_seconds: float = Field(
        default=2.0,
        gt=0,
        le=3600,
        description="How often the worker looks for work when nothing wakes it.",
    )
    vcluster_memory_mib: int = Field(
        default=585,
        gt=0,
        le=1_000_000,
        description=(
            "Host memory one awake team vCluster holds (its syncer, kine, virtual API "
            "server and controller manager), for what sleeping clusters save."
        ),
    )
    sleep_policy_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description=(
            "How often the sleep policy looks for idle team clusters (one listing of the "
            "vClusters' pods on the host each time)."
        ),
    )
    worker_resync_seconds: float = Field(
        default=300.0, gt=0, le=86400, description="How often a ready team is re-checked for drift."
    )
    worker_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How long one worker may hold a team before another process may take it over.",
    )
    usage_sample_seconds: int = Field(
        default=60,
        ge=1,
        le=3600,
        description=(
            "How often the collector samples every team's GPU use (raw for a day, hourly "
            "for 15 days, daily for 13 months)."
        ),
    )
    usage_collector_enabled: bool = Field(
        default=True, description="Run the usage collector in this process."
    )
    smtp_host: str | None = Field(
        default=None, description="SMTP server for e-mail notifications (none: no e-mail)."
    )
    smtp_port: int = Field(default=587, ge=1, le=65535, description="SMTP server port.")
    smtp_security: Literal["starttls", "tls", "none"] = Field(
        default="starttls",
        description=(
            "`starttls`, `tls` (implicit, port 465) or `none` (a local relay; no password "
            "over it outside development)."
        ),
    )
    smtp_ca_file: str | None = Field(
        default=None,
        description="CA bundle that signed the SMTP server's certificate (an internal relay).",
    )
    smtp_username: str | None = Field(default=None, description="SMTP user, if it asks.")
    smtp_password: SecretStr | None = Field(default=None, description="SMTP password.")
    smtp_from: str = Field(
        default="",
        description=(
            "The From address (required with SMTP), e.g. `GPU portal <gpu-portal@example.org>`."
        ),
    )
    smtp_timeout_seconds: float = Field(
        default=10.0, gt=0, le=120, description="Time-out of one SMTP conversation."
    )
    webhook_timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="Time-out of one webhook post."
    )
    webhook_private_hosts: bool | None = Field(
        default=None,
        description="Allow webhooks to loopback, private and link-local addresses.",
        json_schema_extra={"shown_default": "development only"},
    )
    delivery_max_attempts: int = Field(
        default=8,
        ge=1,
        le=50,
        description="Attempts before a delivery is given up (listed on `/admin/deliveries`).",
    )
    delivery_retry_base_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="Back-off of a failed delivery, doubling up to an hour.",
    )
    delivery_enabled: bool = Field(
        default=True,
        description=(
            "Run the delivery worker in this process (off on web replicas when "
            "`gpu-portal deliver` runs apart)."
        ),
    )
    delivery_poll_seconds: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description=(
            "How often the worker looks for due deliveries when no commit of its process woke it."
        ),
    )
    digest_weekday: int = Field(
        default=0,
        ge=0,
        le=6,
        description="Day of the weekly right-sizing digest (0 = Monday, UTC).",
    )
    grant_max_days: int = Field(
        default=31,
        ge=1,
        le=366,
        description="The longest window a temporary quota grant may span, in days.",
    )
    grant_notice_hours: int = Field(
        default=24,
        ge=1,
        le=24 * 14,
        description="Hours before a temporary grant ends when its team is told.",
    )
    grants_seconds: float = Field(
        default=30,
        gt=0,
        le=3600,
        description="How often the portal applies temporary grants whose start or end passed.",
    )
    budget_alerts: str = Field(
        default="50,80,100",
        pattern=r"^\s*[0-9]{1,3}\s*(,\s*[0-9]{1,3}\s*)*$",
        description="Percent of a GPU-hour budget at which its team is told, comma-separated.",
    )
    budget_seconds: float = Field(
        default=300,
        gt=0,
        le=3600,
        description="How often the portal checks GPU-hour budgets against the usage history.",
    )
    rightsizing_days: int = Field(
        default=14,
        ge=1,
        le=14,
        description="Days of usage history right-sizing looks at (1 to 14).",
    )
    rightsizing_idle_share: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="Idle: p95 in use below this share of the guarantee.",
    )
    rightsizing_waiting_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description=(
            "Starved: work waited at least this share of the time, demand above the guarantee."
        ),
    )

    usage_cache_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="One cluster read of usage serves every viewer this long.",
    )
    refused_pods_seconds: float = Field(
        default=15.0,
        ge=0,
        le=3600,
        description=(
            "One read of the pods a team's vCluster could not sync to the host serves "
            "every viewer of the team page this long."
        ),
    )
    workloads_seconds: float = Field(
        default=30.0,
        ge=1,
        le=3600,
        description=(
            "How often the portal reads KAI's decisions about each awake team's work "
            "(waiting reasons and evictions) from the host; one read serves every viewer."
        ),
    )
    eviction_burst_minutes: float = Field(
        default=10.0,
        ge=0,
        le=1440,
        description=(
            "A team hears of KAI's evictions of its work at most once in this many minutes: "
            "the evictions in between come in the next notice, together."
        ),
    )
    long_wait_minutes: float = Field(
        default=30.0,
        ge=1,
        le=10080,
        description=(
            "A workload KAI keeps waiting this long is written on its team's timeline "
            "(once per workload)."
        ),
    )
    kai_queue_label: str = Field(
        default="kai.scheduler/queue",
        description=(
            "The pod label KAI reads the queue from (`runai/queue` up to KAI v0.5.x): used "
            "in the pod specs and the queue-pinning policy."
        ),
    )
    node_pool_label_key: str = Field(
        default="kai.scheduler/node-pool",
        description=(
            "The node label that puts a node in a pool (KAI's "
            "`spec.global.nodePoolLabelKey`): each pool's queues and the pods a team sends "
            "there carry it too; the default pool's nodes carry none."
        ),
    )
    kai_metrics_prefix: str = Field(
        default="kai",
        description="Namespace of KAI's metrics (`runai` up to KAI v0.4.x).",
    )
    prometheus_url: str | None = Field(
        default=None,
        description=(
            "Read `kai_queue_allocated_gpus` and `kai_queue_fair_share_gpu` from this "
            "Prometheus instead of computing them."
        ),
    )
    metrics_enabled: bool = Field(
        default=True,
        description="Count requests and their latency for `/metrics`.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description=(
            "Bearer token `/metrics` requires on the main port (without it or a port: "
            "development only)."
        ),
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Serve `/metrics` on this separate port only.",
    )
    metrics_host: str = Field(
        default="127.0.0.1",
        description=(
            "Address the separate metrics port listens on; `gpu-portal serve --host` sets "
            "it to the portal's own address unless it is set."
        ),
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`text` or `json` (one object per line, with the request id).",
    )
    retry_base_seconds: float = Field(
        default=2.0,
        ge=0,
        le=3600,
        description="First retry delay after a failed step (doubles per attempt).",
    )
    retry_max_seconds: float = Field(
        default=300.0, gt=0, le=86400, description="Longest retry delay."
    )
    session_idle_seconds: int = Field(
        default=3600,
        ge=60,
        le=30 * 86400,
        description="A session unused this long must sign in again.",
    )
    session_absolute_seconds: int = Field(
        default=12 * 3600,
        ge=60,
        le=90 * 86400,
        description="A session ends this long after sign-in.",
    )
    api_token_max_days: int = Field(
        default=90, ge=1, le=3650, description="Longest lifetime of a personal API token."
    )
    public_url: str | None = Field(
        default=None,
        description=(
            "The portal's address as users reach it: the OIDC redirect URI and the links "
            "in e-mails and webhook posts (`http://127.0.0.1:8000` in messages when "
            "unset; required with SMTP outside development)."
        ),
        json_schema_extra={"shown_default": "from the request"},
    )
    oidc_issuer: str | None = Field(
        default=None, description="OIDC issuer URL; turns single sign-on on."
    )
    oidc_discovery_url: str | None = Field(
        default=None,
        description=(
            "Where the portal itself fetches the discovery document, when the issuer URL "
            "is not reachable from it."
        ),
        json_schema_extra={"shown_default": "issuer + `/.well-known/openid-configuration`"},
    )
    oidc_client_id: str = Field(default="", description="OIDC client id.")
    oidc_client_secret: SecretStr = Field(default=SecretStr(""), description="OIDC client secret.")
    oidc_scopes: str = Field(default="openid email profile", description="Scopes asked for.")
    oidc_provider_name: str = Field(
        default="single sign-on", description="Shown on the sign-in button."
    )
    oidc_groups_claim: str = Field(
        default="groups", description="Claim that lists the user's groups."
    )
    oidc_admin_group: str = Field(
        default="gpu-portal-admins", description="Group whose members are admins."
    )
    oidc_team_group_pattern: str = Field(
        default="gpu-team-{team}",
        description="Groups that make their members leads of a team; empty turns it off.",
    )
    oidc_audience: str | None = Field(
        default=None,
        description="Audience required in JWT bearer access tokens.",
        json_schema_extra={"shown_default": "the client id"},
    )
    oidc_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Time-out for calls to the provider."
    )

    @field_validator("template_chart_sources")
    @classmethod
    def _chart_sources(cls, value: str) -> str:
        for source in (s.strip() for s in value.split(",") if s.strip()):
            parts = urlsplit(source)
            if parts.scheme not in ("https", "http", "oci") or not parts.hostname:
                raise ValueError(
                    f"{source!r} is not a chart source: write oci://registry/path or "
                    "https://charts.example.org"
                )
            if parts.username is not None or parts.query or parts.fragment:
                raise ValueError(f"{source!r}: a chart source has no credentials or query")
        return value

    @property
    def chart_sources(self) -> tuple[str, ...]:
        """PORTAL_TEMPLATE_CHART_SOURCES as a list."""
        return tuple(s.strip() for s in self.template_chart_sources.split(",") if s.strip())

    @field_validator("kai_queue_label", "node_pool_label_key")
    @classmethod
    def _label_key(cls, value: str, info: ValidationInfo) -> str:
        if not LABEL_KEY.fullmatch(value):
            example = {"kai_queue_label": "kai.scheduler/queue"}.get(
                str(info.field_name), "kai.scheduler/node-pool"
            )
            raise ValueError(
                f"PORTAL_{str(info.field_name).upper()} must be a Kubernetes label key such "
                f"as {example}"
            )
        return value

    @field_validator("kai_metrics_prefix")
    @classmethod
    def _metrics_prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", value):
            raise ValueError("PORTAL_KAI_METRICS_PREFIX must be a metric namespace such as kai")
        return value

    @field_validator("simulated_node_pools")
    @classmethod
    def _simulated_node_pools(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split(","))):
            if not re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9_.]*=[^:,]*:[0-9]+(\.[0-9]+)?", part):
                raise ValueError(
                    "PORTAL_SIMULATED_NODE_POOLS: write each pool as "
                    f"<label value>=<GPU type>:<GPUs>, such as l40s=NVIDIA-L40S:4 (not {part!r})"
                )
        return value

    @property
    def simulated_pools(self) -> tuple[tuple[str, str, float], ...]:
        """PORTAL_SIMULATED_NODE_POOLS as (label value, GPU type, GPUs)."""
        pools = []
        for part in filter(None, (p.strip() for p in self.simulated_node_pools.split(","))):
            value, rest = part.split("=", 1)
            product, gpus = rest.rsplit(":", 1)
            pools.append((value, product, float(gpus)))
        return tuple(pools)

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        try:
            url = make_url(value)
        except ArgumentError:
            raise ValueError(
                "PORTAL_DATABASE_URL is not a database URL: use sqlite:///path/to/portal.db "
                "or postgresql+psycopg://user:password@host/database"
            ) from None
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError(
                f"PORTAL_DATABASE_URL names {url.get_backend_name()!r}: the portal runs on "
                "sqlite or postgresql (postgresql+psycopg://user:password@host/database)"
            )
        if url.get_backend_name() == "postgresql" and url.get_driver_name() != "psycopg":
            raise ValueError(
                "PORTAL_DATABASE_URL: use the psycopg driver, "
                "postgresql+psycopg://user:password@host/database"
            )
        return value

    @field_validator("vcluster_chart_version")
    @classmethod
    def _chart_version(cls, value: str) -> str:
        if not re.fullmatch(r"v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?", value):
            raise ValueError(f"must be a chart version such as 0.36.1 (got {value!r})")
        return value

    @field_validator(
        "vcluster_cpu_request",
        "vcluster_memory_request",
        "vcluster_memory_limit",
        "vcluster_storage_size",
    )
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not re.fullmatch(_QUANTITY, value):
            raise ValueError(
                f"must be a Kubernetes quantity such as 500m, 2, 256Mi or 5Gi (got {value!r})"
            )
        return value

    # --- checks: one per rule, each naming the variables to change --------------------

    @field_validator("secret_key")
    @classmethod
    def _secret_length(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 16:
            raise ValueError("PORTAL_SECRET_KEY must be at least 16 characters long.")
        return value

    @model_validator(mode="after")
    def _refuse_default_secret(self) -> Settings:
        if not self.development and self.secret_key.get_secret_value() == DEFAULT_SECRET_KEY:
            raise ValueError(
                "PORTAL_SECRET_KEY is the built-in default: set a random value "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`) "
                "or set PORTAL_DEVELOPMENT=true for a local run."
            )
        return self

    @model_validator(mode="after")
    def _oidc_client(self) -> Settings:
        if self.oidc_issuer and not (
            self.oidc_client_id and self.oidc_client_secret.get_secret_value()
        ):
            raise ValueError(
                "PORTAL_OIDC_ISSUER is set: also set PORTAL_OIDC_CLIENT_ID and "
                "PORTAL_OIDC_CLIENT_SECRET from your identity provider's client registration"
            )
        return self

    @field_validator("oidc_team_group_pattern")
    @classmethod
    def _team_group_pattern(cls, value: str) -> str:
        if value and "{team}" not in value:
            raise ValueError(
                "PORTAL_OIDC_TEAM_GROUP_PATTERN must contain {team}, e.g. gpu-team-{team}"
            )
        return value

    @model_validator(mode="after")
    def _chart_source(self) -> Settings:
        problem = chart_source_problem(self.vcluster_chart_repo, self.vcluster_chart_version)
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("kube_service_account")
    @classmethod
    def _service_account(cls, value: str | None) -> str | None:
        if value is None:
            return value
        namespace, slash, name = value.partition("/")
        if not (slash and namespace.strip() and name.strip()) or "/" in name:
            raise ValueError(
                "PORTAL_KUBE_SERVICE_ACCOUNT must be the portal's ServiceAccount as "
                f"namespace/name, e.g. gpu-portal/gpu-portal (got {value!r})"
            )
        return value

    @model_validator(mode="after")
    def _oidc_kubeconfigs(self) -> Settings:
        if self.kubeconfig_mode == "oidc" and not self.oidc_issuer:
            raise ValueError(
                "PORTAL_KUBECONFIG_MODE=oidc needs the identity provider: set PORTAL_OIDC_ISSUER"
            )
        return self

    @field_validator("kubeconfig_ttl", "kubeconfig_max_ttl")
    @classmethod
    def _ttl(cls, value: str, info: ValidationInfo) -> str:
        seconds = parse_duration(value)
        if seconds is None or not MIN_TTL_SECONDS <= seconds <= MAX_TTL_SECONDS:
            raise ValueError(
                f"PORTAL_{str(info.field_name).upper()} must be a duration from 10m to 365d "
                f"such as 30m, 8h or 7d (got {value!r})"
            )
        return value

    @model_validator(mode="after")
    def _ttl_within_max(self) -> Settings:
        if self.kubeconfig_ttl_seconds > self.kubeconfig_max_ttl_seconds:
            raise ValueError(
                f"PORTAL_KUBECONFIG_TTL ({self.kubeconfig_ttl}) is longer than "
                f"PORTAL_KUBECONFIG_MAX_TTL ({self.kubeconfig_max_ttl}): shorten it or raise "
                "the maximum"
            )
        return self

    @field_validator(
        "kubeconfig_admin_role",
        "kubeconfig_lead_role",
        "kubeconfig_member_role",
        "kubeconfig_namespace",
    )
    @classmethod
    def _object_name(cls, value: str, info: ValidationInfo) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.:]*[a-z0-9])?", value):
            raise ValueError(
                f"PORTAL_{str(info.field_name).upper()} must be a Kubernetes object name such "
                f"as cluster-admin or edit (got {value!r})"
            )
        return value

    @field_validator("smtp_ca_file")
    @classmethod
    def _smtp_ca_file(cls, value: str | None) -> str | None:
        if value and not Path(value).is_file():
            raise ValueError(f"PORTAL_SMTP_CA_FILE: no file at {value}")
        return value

    @model_validator(mode="after")
    def _smtp_sender(self) -> Settings:
        if self.smtp_host and not re.fullmatch(
            r"[^@\s<>]+@[^@\s<>]+|.*<[^@\s<>]+@[^@\s<>]+>", self.smtp_from
        ):
            raise ValueError(
                "PORTAL_SMTP_HOST is set: also set PORTAL_SMTP_FROM to the sender address, "
                "e.g. 'GPU portal <gpu-portal@example.org>'"
            )
        return self

    @model_validator(mode="after")
    def _smtp_sign_in(self) -> Settings:
        if self.smtp_username and not self.smtp_password:
            raise ValueError("PORTAL_SMTP_USERNAME is set: also set PORTAL_SMTP_PASSWORD")
        if self.smtp_username and self.smtp_security == "none" and not self.development:
            raise ValueError(
                "PORTAL_SMTP_USERNAME with PORTAL_SMTP_SECURITY=none would send the password "
                "in clear: use starttls or tls"
            )
        return self

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^/\s]+(/[^\s]*)?", value):
            raise ValueError(
                "PORTAL_PUBLIC_URL must be the portal's address such as "
                f"https://gpu.example.org (got {value!r})"
            )
        return value

    @model_validator(mode="after")
    def _links_in_mail(self) -> Settings:
        if self.smtp_host and self.public_url is None and not self.development:
            raise ValueError(
                "PORTAL_SMTP_HOST is set: also set PORTAL_PUBLIC_URL (e.g. "
                "https://gpu.example.org) so the e-mails' links lead to the portal"
            )
        return self

    # --- the groups each consumer takes ---------------------------------------------

    @property
    def vcluster(self) -> VClusterSettings:
        group: VClusterSettings = _group(
            self, VClusterSettings, "vcluster_", helm_cli=self.helm_cli,
            chart_version=self.chart_version,
        )  # fmt: skip
        return group

    @property
    def kubeconfigs(self) -> KubeconfigSettings:
        group: KubeconfigSettings = _group(
            self, KubeconfigSettings, "kubeconfig_",
            ttl_seconds=self.kubeconfig_ttl_seconds,
            max_ttl_seconds=self.kubeconfig_max_ttl_seconds,
        )  # fmt: skip
        return group

    @property
    def smtp(self) -> SmtpSettings:
        group: SmtpSettings = _group(self, SmtpSettings, "smtp_", sender=self.smtp_from)
        return group

    @property
    def oidc(self) -> OidcSettings:
        group: OidcSettings = _group(self, OidcSettings, "oidc_")
        return group

    @property
    def worker(self) -> WorkerSettings:
        group: WorkerSettings = _group(
            self, WorkerSettings, "worker_",
            retry_base_seconds=self.retry_base_seconds,
            retry_max_seconds=self.retry_max_seconds,
        )  # fmt: skip
        return group

    @property
    def chart_version(self) -> str:
        """The vCluster chart version as the chart itself spells it (no leading v)."""
        return self.vcluster_chart_version.lstrip("v")

    @property
    def kubeconfig_ttl_seconds(self) -> int:
        return parse_duration(self.kubeconfig_ttl) or 8 * 3600

    @property
    def kubeconfig_max_ttl_seconds(self) -> int:
        return parse_duration(self.kubeconfig_max_ttl) or 7 * 86400

    @property
    def reload_templates(self) -> bool:
        return self.development if self.template_reload is None else self.template_reload

    @property
    def portal_url(self) -> str:
        """Where links in messages point (no trailing slash)."""
        return (self.public_url or "http://127.0.0.1:8000").rstrip("/")

    def secret_values(self) -> list[str]:
        """Every configured secret, for the logs' redaction (``logs.register_secrets``)."""
        found = [self.secret_key, self.oidc_client_secret, self.smtp_password, self.metrics_token]
        return [s.get_secret_value() for s in found if s is not None]

    @property
    def email_enabled(self) -> bool:
        return bool(self.smtp_host)

    @property
    def personal_channels(self) -> frozenset[str]:
        """Where personal notices go besides the in-app bell: what every process that
        writes notifications gives its session factory (make_session_factory)."""
        return frozenset({"email"}) if self.email_enabled else frozenset()

    @property
    def allow_private_webhooks(self) -> bool:
        if self.webhook_private_hosts is None:
            return self.development
        return self.webhook_private_hosts

    @property
    def oidc_enabled(self) -> bool:
        return bool(self.oidc_issuer)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


MIN_TTL_SECONDS = 600  # the shortest token the TokenRequest API issues
MAX_TTL_SECONDS = 365 * 86400
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str) -> int | None:
    """Seconds in "90m", "8h", "7d", "1h30m" or a plain number of seconds; None if not."""
    text = value.strip().lower()
    if text.isascii() and text.isdigit():
        return int(text)
    parts = re.findall(r"([0-9]+)([smhd])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _UNITS[u] for n, u in parts)


def format_duration(seconds: int) -> str:
    """The shortest exact spelling: 28800 -> "8h", 5400 -> "1h30m", 604800 -> "7d"."""
    out = ""
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, _UNITS[unit])
        if count:
            out += f"{count}{unit}"
    return out or "0s"


def chart_source_problem(source: str, version: str) -> str | None:
    """What is wrong with PORTAL_VCLUSTER_CHART_REPO, or None."""
    if source.startswith(("https://", "http://", "oci://")):
        return None
    if not source.startswith("/"):
        return (
            "PORTAL_VCLUSTER_CHART_REPO must be a chart repository URL (https://...), an OCI "
            "repository (oci://registry/path) or the absolute path of a chart archive "
            f"(/charts/vcluster-{version.lstrip('v')}.tgz)"
        )
    path = Path(source)
    if not path.is_file():
        return f"PORTAL_VCLUSTER_CHART_REPO: no chart archive at {source}"
    found = chart_archive_version(path)
    if found is None:
        return f"PORTAL_VCLUSTER_CHART_REPO: {source} is not a Helm chart archive"
    if found != version.lstrip("v"):
        return (
            f"PORTAL_VCLUSTER_CHART_REPO holds chart version {found} but "
            f"PORTAL_VCLUSTER_CHART_VERSION is {version}: set one to match the other"
        )
    return None


def chart_archive_version(path: Path) -> str | None:
    """The version in a packaged chart's Chart.yaml (the top folder's), or None."""
    try:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive.getmembers():
                parts = member.name.split("/")
                if len(parts) == 2 and parts[1] == "Chart.yaml" and member.isfile():
                    handle = archive.extractfile(member)
                    if handle is None:
                        return None
                    for line in handle.read().decode("utf-8", "replace").splitlines():
                        key, _, value = line.partition(":")
                        if key == "version":
                            return value.strip().strip("'\"")
    except (OSError, tarfile.TarError):
        return None
    return None


def describe_error(exc: ValidationError) -> list[str]:
    """One line per bad setting, naming its variable; never the value (it may be a secret)."""
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        fields = [str(part) for part in error["loc"] if isinstance(part, str)]
        if error["type"] == "literal_error" and fields:
            # "PORTAL_SMTP_SECURITY must be starttls, tls or none": the choices, as typed.
            choices = str(error.get("ctx", {}).get("expected", "")).replace("'", "")
            message = f"PORTAL_{fields[0].upper()} must be {choices}"
        if fields and not message.startswith("PORTAL_"):
            message = f"PORTAL_{fields[0].upper()}: {message}"
        lines.append(message)
    return lines


def _shown_default(name: str) -> str:
    field = Settings.model_fields[name]
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("shown_default"), str):
        return str(extra["shown_default"])
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, StrEnum):
        value = value.value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "empty" if value == "" else f"`{value}`"


def settings_table() -> list[str]:
    """The README's table of settings, one row per field, from the fields' own
    descriptions (``scripts/settings-table.py`` writes it; a test compares)."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(f"| `PORTAL_{name.upper()}` | {_shown_default(name)} | {meaning} |")
    return rows


@lru_cache
def get_settings() -> Settings:
    return Settings()
