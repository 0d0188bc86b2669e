"""docker-compose.yml loads the way `docker compose config` loads it (compose-go)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from app.core.config import Settings
from tests.servers import tool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def composecheck() -> Path:
    return tool("composecheck")


def run(binary: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), str(ROOT / "docker-compose.yml")],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **env},
        cwd=ROOT,
        check=False,
    )


def test_compose_file_is_valid(composecheck: Path) -> None:
    result = run(composecheck, {"PORTAL_SECRET_KEY": "s" * 32})
    assert result.returncode == 0, result.stderr
    project = yaml.safe_load(result.stdout)
    portal, postgres = project["services"]["portal"], project["services"]["postgres"]
    assert portal["build"]["context"] == str(ROOT)
    assert (ROOT / "Dockerfile").exists()
    assert portal["depends_on"]["postgres"]["condition"] == "service_healthy"
    env = portal["environment"]
    assert env["PORTAL_DEVELOPMENT"] == "false"
    assert env["PORTAL_DATABASE_URL"].startswith("postgresql+psycopg://portal:portal@postgres:")
    assert postgres["environment"]["POSTGRES_DB"] == "portal"
    portal_env = {k for k in env if k.startswith("PORTAL_")}
    assert portal_env <= {f"PORTAL_{name.upper()}" for name in Settings.model_fields}


def test_compose_identity_provider_matches_the_portal(composecheck: Path) -> None:
    result = run(composecheck, {"PORTAL_SECRET_KEY": "s" * 32})
    project = yaml.safe_load(result.stdout)
    env = project["services"]["portal"]["environment"]
    keycloak = project["services"]["keycloak"]
    realm_file = ROOT / "deploy/keycloak/gpu-portal-realm.json"
    assert any(v["source"] == str(realm_file) for v in keycloak["volumes"])
    realm = json.loads(realm_file.read_text())
    client = next(c for c in realm["clients"] if c["clientId"] == env["PORTAL_OIDC_CLIENT_ID"])
    assert client["secret"] == env["PORTAL_OIDC_CLIENT_SECRET"]
    assert env["PORTAL_PUBLIC_URL"] + "/auth/callback" in client["redirectUris"]
    assert (
        env["PORTAL_OIDC_ISSUER"]
        == f"{keycloak['environment']['KC_HOSTNAME']}/realms/{realm['realm']}"
    )
    groups = {g["name"] for g in realm["groups"]}
    assert env["PORTAL_OIDC_ADMIN_GROUP"] in groups
    assert env["PORTAL_OIDC_TEAM_GROUP_PATTERN"].replace("{team}", "nlp") in groups
    users = {u["username"]: u for u in realm["users"]}
    assert users["admin"]["groups"] == ["/gpu-portal-admins"]
    assert users["lead"]["groups"] == ["/gpu-team-nlp"]


def test_compose_refuses_to_run_without_a_secret(composecheck: Path) -> None:
    result = run(composecheck, {})
    assert result.returncode != 0
    assert "set PORTAL_SECRET_KEY" in result.stderr
