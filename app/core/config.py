"""One settings class for the whole portal (environment prefix ``PORTAL_``)."""

from __future__ import annotations

import re
import tarfile
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_SECRET_KEY = "development-secret-key-change-me"  # noqa: S105 - refused outside development
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ClusterBackendKind(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


_QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"


class Settings(BaseSettings):
    """Everything the portal reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="PORTAL_", env_file=".env", extra="ignore")

    development: bool = Field(
        default=False,
        description="Development mode: enables the development sign-in and allows the default key.",
    )
    template_reload: bool | None = Field(
        default=None,
        description="Re-read changed templates (a file check per include); default: development.",
    )
    secret_key: SecretStr = Field(
        default=SecretStr(DEFAULT_SECRET_KEY),
        description="Signs session cookies and CSRF tokens.",
    )
    database_url: str = Field(
        default="sqlite:///./gpu-portal.db", description="SQLAlchemy URL: SQLite or PostgreSQL."
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
        description="The portal's own ServiceAccount as namespace/name; bound to the "
        "team-namespace ClusterRole (PORTAL_KUBE_TEAM_ROLE) in each team namespace it creates.",
    )
    kube_team_role: str = Field(
        default="gpu-portal-team-namespace",
        min_length=1,
        max_length=253,
        description="The ClusterRole the portal binds itself to in each team namespace "
        "(the Helm chart names it <release>-team-namespace and sets this).",
    )
    vcluster_installer: str = Field(
        default="cli", description="Install vClusters with the `cli` (vcluster) or `helm`."
    )
    vcluster_cli: str = Field(default="vcluster", description="The vcluster executable.")
    helm_cli: str = Field(default="helm", description="The helm executable (helm installer).")
    vcluster_chart_repo: str = Field(
        default="https://charts.loft.sh",
        description="Where the vCluster chart comes from: a chart repository URL (the "
        "public one or a mirror), an OCI repository holding chart `vcluster` "
        "(oci://registry/path), or a chart archive on the portal's disk (an absolute path "
        "to vcluster-<version>.tgz) for an air-gapped cluster.",
    )
    vcluster_chart_version: str = Field(
        default="0.36.1",
        description="vCluster chart version to install (>= 0.21). Changing it upgrades "
        "every team's vCluster, one at a time (progress on the Pool page).",
    )
    vcluster_image_registry: str = Field(
        default="",
        max_length=253,
        description="Registry that serves the vCluster images (e.g. a mirror); empty keeps "
        "the chart's own registries.",
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
    vcluster_upgrade_timeout_seconds: float = Field(
        default=900.0,
        gt=0,
        le=86400,
        description="An upgraded vCluster not ready after this long stops the rollout.",
    )
    vcluster_api_address: str = Field(
        default="service",
        description="How the portal itself reaches a team's vCluster API (to issue personal "
        "credentials): service (https://NAME.NAMESPACE.svc, from inside the host cluster), "
        "exposed (the address users get) or secret (the server written in secret vc-NAME, "
        "e.g. by exportKubeConfig.server).",
    )
    kubeconfig_mode: str = Field(
        default="token",
        description="token: each person gets a ServiceAccount token issued inside the "
        "vCluster (expiring, revocable); oidc: the vCluster's API server trusts the identity "
        "provider and kubeconfigs sign in with kubectl oidc-login (no static credential).",
    )
    kubeconfig_ttl: str = Field(
        default="8h", description="Default lifetime of a downloaded kubeconfig (30m, 8h, 2d)."
    )
    kubeconfig_max_ttl: str = Field(
        default="7d", description="Longest lifetime a person may choose for a kubeconfig."
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
        description="Namespace inside each vCluster that holds the portal's per-person "
        "ServiceAccounts.",
    )
    kubeconfig_sweep_seconds: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description="How often every ready vCluster's ServiceAccounts are compared with the "
        "people allowed (revocations are applied at once besides).",
    )
    kubeconfig_oidc_client_id: str = Field(
        default="",
        description="oidc mode: the identity provider's client id kubectl signs in with "
        "(a public client; default: PORTAL_OIDC_CLIENT_ID).",
    )
    vcluster_expose: str = Field(
        default="LoadBalancer",
        description="How users reach a vCluster: LoadBalancer, NodePort or Ingress.",
    )
    vcluster_ingress_host: str = Field(
        default="{team}.vcluster.example.org",
        description="Ingress mode: the host of a team's API server ({team} is replaced).",
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
        description="Simulated backend: seconds each cluster call blocks (a slow API "
        "server or helm install), to see leases held during a pass.",
    )
    worker_enabled: bool = Field(default=True, description="Run the provisioning worker.")
    worker_interval_seconds: float = Field(
        default=2.0,
        gt=0,
        le=3600,
        description="How often the worker looks for work when nothing wakes it.",
    )
    worker_resync_seconds: float = Field(
        default=300.0, gt=0, le=86400, description="How often a ready team is re-checked for drift."
    )
    worker_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How long one worker may hold a team before another may take it.",
    )
    usage_sample_seconds: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="How often the collector samples every team's GPU use.",
    )
    usage_collector_enabled: bool = Field(default=True, description="Run the usage collector.")
    smtp_host: str | None = Field(
        default=None, description="SMTP server for e-mail notifications (none: no e-mail)."
    )
    smtp_port: int = Field(default=587, ge=1, le=65535, description="SMTP server port.")
    smtp_security: str = Field(
        default="starttls",
        description="starttls (port 587), tls (implicit TLS, port 465) or none (a local "
        "relay only).",
    )
    smtp_ca_file: str | None = Field(
        default=None,
        description="CA bundle (PEM) that signed the SMTP server's certificate, when it is "
        "not a public CA (an internal relay).",
    )
    smtp_username: str | None = Field(default=None, description="SMTP user, if it asks.")
    smtp_password: SecretStr | None = Field(default=None, description="SMTP password.")
    smtp_from: str = Field(
        default="", description="The From address of notification e-mails (needed with SMTP)."
    )
    smtp_timeout_seconds: float = Field(
        default=10.0, gt=0, le=120, description="Time-out of one SMTP conversation."
    )
    webhook_timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="Time-out of one webhook post."
    )
    webhook_private_hosts: bool | None = Field(
        default=None,
        description="Allow webhooks to loopback, private and link-local addresses "
        "(default: only in development). Off, a lead cannot make the portal post into "
        "the internal network.",
    )
    delivery_max_attempts: int = Field(
        default=8,
        ge=1,
        le=50,
        description="A notification is given up on one channel after this many attempts "
        "(listed on the admins' delivery page with its last error).",
    )
    delivery_retry_base_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="Back-off of a failed delivery: this, doubled each attempt, up to an hour.",
    )
    delivery_enabled: bool = Field(
        default=True,
        description="Run the notification delivery worker in this process (off on web "
        "replicas when `gpu-portal deliver` runs as its own process).",
    )
    delivery_poll_seconds: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="How often the delivery worker looks for due messages when no commit "
        "in its own process woke it.",
    )
    digest_weekday: int = Field(
        default=0, ge=0, le=6, description="Day of the weekly digest (0 = Monday, UTC)."
    )
    rightsizing_days: int = Field(
        default=14,
        ge=1,
        le=14,
        description="Right-sizing looks at this many days of usage history (hourly history "
        "is kept for 15 days, so at most 14).",
    )
    rightsizing_idle_share: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="A team whose p95 of GPUs in use stayed below this share of its "
        "guarantee over the period is flagged idle.",
    )
    rightsizing_waiting_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="A team whose work waited (demand above what it got) in at least this "
        "share of the period, with demand above its guarantee, is flagged starved.",
    )

    usage_cache_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="One cluster read of usage serves every viewer this long.",
    )
    kai_queue_label: str = Field(
        default="kai.scheduler/queue",
        description="The pod label KAI reads a pod's queue from: kai.scheduler/queue in "
        "current releases (0.1.0 read runai/queue). Used by the pod spec and the "
        "queue-pinning admission policy.",
    )
    kai_metrics_prefix: str = Field(
        default="kai",
        description="The namespace of KAI's scheduler metrics (kai by default, runai in "
        "0.1.0): the portal reads <prefix>_queue_allocated_gpus and "
        "<prefix>_queue_fair_share_gpu.",
    )
    prometheus_url: str | None = Field(
        default=None,
        description="Read kai_queue_allocated_gpus and kai_queue_fair_share_gpu from this "
        "Prometheus instead of computing them.",
    )
    metrics_enabled: bool = Field(
        default=True,
        description="Count requests and their latency for /metrics (the per-request "
        "middleware); off leaves /metrics with the database and worker figures only.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="Bearer token that /metrics requires on the portal's port. Without it "
        "(and without PORTAL_METRICS_PORT) /metrics answers only in development.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Serve /metrics on this separate port instead (reachable only where "
        "the network allows, e.g. by Prometheus in the cluster); the main port then has "
        "no /metrics.",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text: one readable line per record; json: one JSON object per line "
        "with the request id, for log collectors.",
    )
    retry_base_seconds: float = Field(
        default=2.0, ge=0, le=3600, description="First retry delay after a failure."
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
        description="A session ends this long after sign-in, used or not.",
    )
    api_token_max_days: int = Field(
        default=90, ge=1, le=3650, description="Longest lifetime of an API token."
    )
    public_url: str | None = Field(
        default=None,
        description="The portal's address as users reach it (https://gpu.example.org): the "
        "OIDC redirect URI and the links in e-mails and webhook messages. Unset: taken from "
        "the request for sign-in; http://127.0.0.1:8000 in messages (development only).",
    )
    oidc_issuer: str | None = Field(
        default=None, description="OIDC issuer URL; enables single sign-on."
    )
    oidc_discovery_url: str | None = Field(
        default=None,
        description="Where the portal fetches the discovery document when the issuer URL is "
        "not reachable from the portal itself (e.g. inside docker compose).",
    )
    oidc_client_id: str = Field(default="", description="OIDC client id.")
    oidc_client_secret: SecretStr = Field(default=SecretStr(""), description="OIDC client secret.")
    oidc_scopes: str = Field(default="openid email profile", description="Scopes to ask for.")
    oidc_provider_name: str = Field(
        default="single sign-on", description="Shown on the sign-in button."
    )
    oidc_groups_claim: str = Field(default="groups", description="Claim that lists groups.")
    oidc_admin_group: str = Field(
        default="gpu-portal-admins", description="Members of this group are portal admins."
    )
    oidc_team_group_pattern: str = Field(
        default="gpu-team-{team}",
        description="Groups of this form make their members leads of team {team}; "
        "empty turns group-based membership off.",
    )
    oidc_audience: str | None = Field(
        default=None,
        description="Audience required in JWT bearer access tokens (default: the client id).",
    )
    oidc_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Time-out for provider calls."
    )

    @field_validator("kai_queue_label")
    @classmethod
    def _queue_label(cls, value: str) -> str:
        if not re.fullmatch(
            r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value
        ):
            raise ValueError(
                "PORTAL_KAI_QUEUE_LABEL must be a Kubernetes label key such as kai.scheduler/queue"
            )
        return value

    @field_validator("kai_metrics_prefix")
    @classmethod
    def _metrics_prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", value):
            raise ValueError("PORTAL_KAI_METRICS_PREFIX must be a metric namespace such as kai")
        return value

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

    @model_validator(mode="after")
    def _refuse_default_secret(self) -> Settings:
        secret_key = self.secret_key.get_secret_value()
        if not self.development and secret_key == DEFAULT_SECRET_KEY:
            raise ValueError(
                "PORTAL_SECRET_KEY is the built-in default: set a random value "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`) "
                "or set PORTAL_DEVELOPMENT=true for a local run."
            )
        if self.oidc_issuer and not (
            self.oidc_client_id and self.oidc_client_secret.get_secret_value()
        ):
            raise ValueError(
                "PORTAL_OIDC_ISSUER is set: also set PORTAL_OIDC_CLIENT_ID and "
                "PORTAL_OIDC_CLIENT_SECRET from your identity provider's client registration"
            )
        if self.vcluster_installer not in ("cli", "helm"):
            raise ValueError("PORTAL_VCLUSTER_INSTALLER must be cli or helm")
        chart_problem = chart_source_problem(self.vcluster_chart_repo, self.vcluster_chart_version)
        if chart_problem:
            raise ValueError(chart_problem)
        if self.vcluster_expose not in ("LoadBalancer", "NodePort", "Ingress"):
            raise ValueError("PORTAL_VCLUSTER_EXPOSE must be LoadBalancer, NodePort or Ingress")
        if self.vcluster_api_address not in ("service", "exposed", "secret"):
            raise ValueError("PORTAL_VCLUSTER_API_ADDRESS must be service, exposed or secret")
        if self.kubeconfig_mode not in ("token", "oidc"):
            raise ValueError("PORTAL_KUBECONFIG_MODE must be token or oidc")
        if self.kubeconfig_mode == "oidc" and not self.oidc_issuer:
            raise ValueError(
                "PORTAL_KUBECONFIG_MODE=oidc needs the identity provider: set PORTAL_OIDC_ISSUER"
            )
        for name in ("kubeconfig_ttl", "kubeconfig_max_ttl"):
            value = getattr(self, name)
            seconds = parse_duration(value)
            if seconds is None or not MIN_TTL_SECONDS <= seconds <= MAX_TTL_SECONDS:
                raise ValueError(
                    f"PORTAL_{name.upper()} must be a duration from 10m to 365d such as 30m, "
                    f"8h or 7d (got {value!r})"
                )
        if self.kubeconfig_ttl_seconds > self.kubeconfig_max_ttl_seconds:
            raise ValueError(
                f"PORTAL_KUBECONFIG_TTL ({self.kubeconfig_ttl}) is longer than "
                f"PORTAL_KUBECONFIG_MAX_TTL ({self.kubeconfig_max_ttl}): shorten it or raise "
                "the maximum"
            )
        for name in (
            "kubeconfig_admin_role",
            "kubeconfig_lead_role",
            "kubeconfig_member_role",
            "kubeconfig_namespace",
        ):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.:]*[a-z0-9])?", getattr(self, name)):
                raise ValueError(
                    f"PORTAL_{name.upper()} must be a Kubernetes object name such as "
                    f"cluster-admin or edit (got {getattr(self, name)!r})"
                )
        if self.oidc_team_group_pattern and "{team}" not in self.oidc_team_group_pattern:
            raise ValueError(
                "PORTAL_OIDC_TEAM_GROUP_PATTERN must contain {team}, e.g. gpu-team-{team}"
            )
        if self.kube_service_account is not None:
            namespace, slash, name = self.kube_service_account.partition("/")
            if not (slash and namespace.strip() and name.strip()) or "/" in name:
                raise ValueError(
                    "PORTAL_KUBE_SERVICE_ACCOUNT must be the portal's ServiceAccount as "
                    "namespace/name, e.g. gpu-portal/gpu-portal "
                    f"(got {self.kube_service_account!r})"
                )
        if self.smtp_security not in ("starttls", "tls", "none"):
            raise ValueError("PORTAL_SMTP_SECURITY must be starttls, tls or none")
        if self.smtp_host and not re.fullmatch(
            r"[^@\s<>]+@[^@\s<>]+|.*<[^@\s<>]+@[^@\s<>]+>", self.smtp_from
        ):
            raise ValueError(
                "PORTAL_SMTP_HOST is set: also set PORTAL_SMTP_FROM to the sender address, "
                "e.g. 'GPU portal <gpu-portal@example.org>'"
            )
        if self.smtp_ca_file and not Path(self.smtp_ca_file).is_file():
            raise ValueError(f"PORTAL_SMTP_CA_FILE: no file at {self.smtp_ca_file}")
        if self.smtp_username and not self.smtp_password:
            raise ValueError("PORTAL_SMTP_USERNAME is set: also set PORTAL_SMTP_PASSWORD")
        if self.smtp_username and self.smtp_security == "none" and not self.development:
            raise ValueError(
                "PORTAL_SMTP_USERNAME with PORTAL_SMTP_SECURITY=none would send the password "
                "in clear: use starttls or tls"
            )
        if self.public_url is not None:
            if not re.fullmatch(r"https?://[^/\s]+(/[^\s]*)?", self.public_url):
                raise ValueError(
                    "PORTAL_PUBLIC_URL must be the portal's address such as "
                    f"https://gpu.example.org (got {self.public_url!r})"
                )
        elif self.smtp_host and not self.development:
            raise ValueError(
                "PORTAL_SMTP_HOST is set: also set PORTAL_PUBLIC_URL (e.g. "
                "https://gpu.example.org) so the e-mails' links lead to the portal"
            )
        if len(secret_key) < 16:
            raise ValueError("PORTAL_SECRET_KEY must be at least 16 characters long.")
        return self

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
    if text.isdigit():
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
    for error in exc.errors(include_input=False, include_url=False, include_context=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        fields = [str(part) for part in error["loc"] if isinstance(part, str)]
        if fields and not message.startswith("PORTAL_"):
            message = f"PORTAL_{fields[0].upper()}: {message}"
        lines.append(message)
    return lines


@lru_cache
def get_settings() -> Settings:
    return Settings()
