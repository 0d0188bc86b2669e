"""Settings: the portal refuses to start with a default secret outside development."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import DEFAULT_SECRET_KEY, ClusterBackendKind, Settings, describe_error
from tests.shared import shared


def test_default_secret_refused_outside_development() -> None:
    with pytest.raises(ValidationError, match="PORTAL_SECRET_KEY is the built-in default"):
        Settings(development=False, secret_key=DEFAULT_SECRET_KEY)


def test_short_secret_refused() -> None:
    with pytest.raises(ValidationError, match="at least 16 characters"):
        Settings(development=False, secret_key="short")


def test_development_may_use_the_default_secret() -> None:
    settings = Settings(development=True)
    assert settings.cluster_backend == ClusterBackendKind.SIMULATED
    assert settings.is_sqlite


def test_environment_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTAL_SECRET_KEY", "x" * 32)
    monkeypatch.setenv("PORTAL_DATABASE_URL", "postgresql+psycopg://db/portal")
    settings = Settings()
    assert not settings.development
    assert not settings.is_sqlite


def test_cli_refuses_to_serve_with_the_default_secret(tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PORTAL_DEVELOPMENT": "false"},
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "refusing to start" in result.stderr
    assert "PORTAL_SECRET_KEY" in result.stderr


@pytest.mark.parametrize("account", ["gpu-portal", "gpu-portal/", "/gpu-portal", "a/b/c", " / "])
def test_service_account_must_be_namespace_slash_name(account: str) -> None:
    """Without a name the portal would bind its role to a subject with an empty name."""
    with pytest.raises(ValidationError, match=r"namespace/name, e\.g\. gpu-portal/gpu-portal"):
        Settings(development=True, kube_service_account=account)
    assert Settings(development=True, kube_service_account="ops/portal").kube_service_account


def _serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "serve"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=60,
        check=False,
    )


def test_start_up_errors_never_print_a_secret() -> None:
    secret = "client-secret-that-must-not-leak-0123456789"
    key = "session-key-that-must-not-leak-0123456789"
    result = _serve(
        {
            "PORTAL_SECRET_KEY": key,
            "PORTAL_OIDC_ISSUER": "https://idp.example.org",
            "PORTAL_OIDC_CLIENT_SECRET": secret,
            "PORTAL_USAGE_SAMPLE_SECONDS": "0",
        }
    )
    assert result.returncode != 0
    assert secret not in result.stderr + result.stdout
    assert key[:8] not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "gpu-portal: refusing to start: PORTAL_USAGE_SAMPLE_SECONDS: "
        "Input should be greater than or equal to 1",
    ]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("nonsense", "PORTAL_DATABASE_URL is not a database URL"),
        ("mysql://db/portal", "PORTAL_DATABASE_URL names 'mysql'"),
        ("postgresql+psycopg2://u:pw@db/portal", "use the psycopg driver"),
    ],
)
def test_a_bad_database_url_is_one_clear_line(url: str, message: str) -> None:
    result = _serve({"PORTAL_DEVELOPMENT": "true", "PORTAL_DATABASE_URL": url})
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "pw" not in lines[0].split(":", 2)[-1].replace("psycopg", "")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("usage_sample_seconds", 0),
        ("worker_interval_seconds", 0),
        ("worker_lease_seconds", -1),
        ("retry_max_seconds", 0),
        ("api_token_max_days", 0),
    ],
)
def test_intervals_must_be_positive(name: str, value: int) -> None:
    with pytest.raises(ValidationError, match="greater than"):
        Settings(development=True, **{name: value})  # type: ignore[arg-type]


def test_secrets_are_hidden_in_reprs() -> None:
    settings = Settings(development=True, secret_key="x" * 40, oidc_client_secret="y" * 40)
    assert "x" * 40 not in repr(settings)
    assert "y" * 40 not in repr(settings)
    assert settings.secret_key.get_secret_value() == "x" * 40


def test_where_the_vcluster_chart_comes_from(tmp_path: Path) -> None:
    """A chart repository (the public one or a mirror), an OCI repository, or an archive on
    disk whose version must match; anything else is refused with what to set."""
    for source in ("https://charts.loft.sh", "http://mirror.internal/charts", "oci://r.io/c"):
        assert Settings(development=True, vcluster_chart_repo=source).vcluster_chart_repo
    with pytest.raises(ValidationError, match="must be a chart repository URL"):
        Settings(development=True, vcluster_chart_repo="charts.loft.sh")
    with pytest.raises(
        ValidationError, match=re.escape("no chart archive at /nowhere/vcluster.tgz")
    ):
        Settings(development=True, vcluster_chart_repo="/nowhere/vcluster.tgz")
    chart = shared("third_party/vcluster/vcluster-0.36.0.tgz")
    assert Settings(
        development=True, vcluster_chart_repo=str(chart), vcluster_chart_version="0.36.0"
    )
    with pytest.raises(
        ValidationError,
        match=re.escape("holds chart version 0.36.0 but PORTAL_VCLUSTER_CHART_VERSION is 0.36.1"),
    ):
        Settings(development=True, vcluster_chart_repo=str(chart), vcluster_chart_version="0.36.1")
    (tmp_path / "not-a-chart.tgz").write_bytes(b"nope")
    with pytest.raises(ValidationError, match="is not a Helm chart archive"):
        Settings(development=True, vcluster_chart_repo=str(tmp_path / "not-a-chart.tgz"))


def test_control_plane_sizes_are_kubernetes_quantities() -> None:
    assert Settings(development=True, vcluster_memory_limit="8Gi", vcluster_cpu_request="1.5")
    with pytest.raises(ValidationError) as bad:
        Settings(development=True, vcluster_storage_size="5 GB", vcluster_chart_version="latest")
    assert describe_error(bad.value) == [
        "PORTAL_VCLUSTER_CHART_VERSION: must be a chart version such as 0.36.1 (got 'latest')",
        "PORTAL_VCLUSTER_STORAGE_SIZE: must be a Kubernetes quantity such as 500m, 2, 256Mi "
        "or 5Gi (got '5 GB')",
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"smtp_host": "mail.example.org"}, "also set PORTAL_SMTP_FROM to the sender address"),
        (
            {
                "smtp_host": "mail.example.org",
                "smtp_from": "p@example.org",
                "development": False,
                "public_url": None,
            },
            "also set PORTAL_PUBLIC_URL",
        ),
        ({"smtp_security": "ssl"}, "PORTAL_SMTP_SECURITY must be starttls, tls or none"),
        ({"smtp_username": "u"}, "also set PORTAL_SMTP_PASSWORD"),
        (
            {
                "smtp_username": "u",
                "smtp_password": "p",
                "smtp_security": "none",
                "development": False,
            },
            "would send the password in clear",
        ),
        ({"smtp_ca_file": "/nowhere/ca.pem"}, "PORTAL_SMTP_CA_FILE: no file at /nowhere/ca.pem"),
        ({"public_url": "gpu.example.org"}, "PORTAL_PUBLIC_URL must be the portal's address"),
        ({"rightsizing_days": 30}, "PORTAL_RIGHTSIZING_DAYS"),
    ],
)
def test_notification_settings_say_what_to_change(values: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "development": True,
        "secret_key": "a-long-enough-secret-key",
        "public_url": "https://gpu.example.org",
    }
    with pytest.raises(ValidationError) as caught:
        Settings(**{**base, **values})  # type: ignore[arg-type]
    assert message in " ".join(describe_error(caught.value))
