"""Settings: the portal refuses to start with a default secret outside development."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from app.core.config import DEFAULT_SECRET_KEY, ClusterBackendKind, Settings


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
