"""deploy/ is accepted by a real API server and matches the portal's settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from app.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "deploy" / name).read_text()) if d]


def test_portal_manifests_pass_server_side_validation(
    admin_api: Any, portal_kubeconfig: Path
) -> None:
    deployment, service = docs("portal.yaml")
    apps, core = client.AppsV1Api(admin_api), client.CoreV1Api(admin_api)
    created = apps.create_namespaced_deployment("gpu-portal", deployment, dry_run="All")
    assert created.spec.template.spec.service_account_name == "gpu-portal"
    core.create_namespaced_service("gpu-portal", service, dry_run="All")


def test_portal_manifests_use_real_settings_and_the_rbac_identity() -> None:
    deployment = docs("portal.yaml")[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    names = {e["name"] for e in container["env"]}
    known = {f"PORTAL_{n.upper()}" for n in Settings.model_fields}
    assert names <= known, names - known
    account = next(
        e["value"] for e in container["env"] if e["name"] == "PORTAL_KUBE_SERVICE_ACCOUNT"
    )
    sa = next(d for d in docs("rbac.yaml") if d["kind"] == "ServiceAccount")
    assert account == f"{sa['metadata']['namespace']}/{sa['metadata']['name']}"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_every_rbac_rule_says_why() -> None:
    lines = (ROOT / "deploy/rbac.yaml").read_text().splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
    assert len(rules) >= 10
    silent = [
        lines[i].strip()
        for i in rules
        if not any(lines[j].strip().startswith("#") for j in range(max(0, i - 4), i))
    ]
    assert silent == [], "each rule needs a comment that says why"
