"""The kubernetes backend against a real kube-apiserver with KAI's Queue CRD."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from kubernetes import client

from app.models import TeamStatus
from app.teams import repository as repo
from tests.k8s.conftest import reconcile_until

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
QUEUES = ("scheduling.run.ai", "v2", "queues")


def statuses(app: FastAPI) -> dict[str, str]:
    with app.state.session_factory() as session:
        return {t.name: t.status for t in repo.get_teams(session)}


def all_ready(app: FastAPI) -> bool:
    return set(statuses(app).values()) == {TeamStatus.READY}


def queue(api: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_cluster_custom_object(*QUEUES, name)
    return found


def test_example_org_as_the_design_source_writes_it(kube_app: FastAPI, admin_api: Any) -> None:
    reconcile_until(kube_app, lambda: all_ready(kube_app))
    parent = queue(admin_api, "ml-org")
    assert parent["spec"]["resources"]["gpu"] == {"quota": 1, "limit": -1, "overQuotaWeight": 1}
    assert parent["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
    for team in ("nlp", "vision", "recommender"):
        q = queue(admin_api, f"team-{team}")
        assert q["spec"]["parentQueue"] == "ml-org"
        assert q["spec"]["priority"] == 100
        assert q["spec"]["resources"]["gpu"] == {"quota": 0.33, "limit": 1, "overQuotaWeight": 1}
        # cpu and memory carry all three fields too: an omitted limit would be 0.
        assert set(q["spec"]["resources"]["cpu"]) == {"quota", "limit", "overQuotaWeight"}
        assert q["spec"]["resources"]["memory"]["limit"] == -1
        assert q["metadata"]["managedFields"][0]["manager"] == "gpu-portal"
        assert q["metadata"]["managedFields"][0]["operation"] == "Apply"
    core = client.CoreV1Api(admin_api)
    ns = core.read_namespace("vcluster-nlp")
    assert ns.metadata.labels["gpu-portal.io/team"] == "nlp"
    admission = client.AdmissionregistrationV1Api(admin_api)
    assert admission.read_validating_admission_policy("gpu-portal-queue-nlp").spec.validations


def test_kubeconfig_is_rewritten_and_audited(kube_app: FastAPI) -> None:
    from tests.web.conftest import client_for

    reconcile_until(kube_app, lambda: all_ready(kube_app))
    lead = client_for(kube_app, "lead-nlp@example.org")
    response = lead.get("/teams/1/kubeconfig")
    assert response.status_code == 200, response.text
    config = yaml.safe_load(response.text)
    assert config["current-context"] == "nlp"
    assert config["clusters"][0]["cluster"]["server"] == "https://nlp.vcluster.example.org"
    assert config["users"][0]["name"] == "nlp-admin"
    assert "localhost:8443" not in response.text
    other = client_for(kube_app, "lead-vision@example.org")
    assert other.get("/teams/1/kubeconfig").status_code == 404
