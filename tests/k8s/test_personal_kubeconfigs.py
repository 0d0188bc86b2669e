"""Personal kubeconfigs used for real: each downloaded file goes to the team's vCluster,
run by the real syncer (which writes its admin credential into secret vc-NAME), through
its load balancer, and what it may do, when it expires and when it stops working are what
the vCluster's API server answers."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from kubernetes import client, config
from sqlalchemy import MetaData, select

from app.core.models import AuditEvent, KubeconfigGrant
from app.runtime import portal_of
from tests.k8s.conftest import all_ready, reconcile_until, vcluster_admin
from tests.k8s.vcluster_runtime import VClusterRuntime
from tests.web.conftest import Client, client_for

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
NLP = 1
MEMBER = "member-nlp@example.org"


def download(person: Client, ttl: str) -> str:
    answer = person.api("POST", f"/api/v1/teams/{NLP}/kubeconfig?ttl={ttl}")
    assert answer.status_code == 200, answer.text
    return answer.text


def api_for(text: str, runtime: VClusterRuntime) -> client.ApiClient:
    """The downloaded file as kubectl would use it: its server is the vCluster's load
    balancer."""
    loaded = yaml.safe_load(text)
    server = f"https://{runtime.address('vcluster-nlp', 'nlp')}"
    assert loaded["clusters"][0]["cluster"]["server"] == server
    return config.new_client_from_config_dict(loaded)


def claims(text: str) -> dict[str, Any]:
    token = yaml.safe_load(text)["users"][0]["user"]["token"]
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


def who(api: client.ApiClient) -> str:
    review = client.AuthenticationV1Api(api).create_self_subject_review({})
    return str(review.status.user_info.username)


def answer_of(call: Any) -> tuple[int, str]:
    try:
        call()
    except client.ApiException as exc:
        return int(exc.status), str(exc.body)
    return 200, ""


def status_of(call: Any) -> int:
    return answer_of(call)[0]


def is_revoked(call: Any) -> bool:
    """The credential no longer says who anyone is. A kube-apiserver answers 401; the
    vCluster's proxy, in front of it, reviews the token, finds it invalid and goes on
    with the request as system:anonymous, whom RBAC refuses (403)."""
    status, body = answer_of(call)
    return status == 401 or (status == 403 and 'User \\"system:anonymous\\"' in body)


def wait_until_revoked(call: Any, timeout: float = 30.0) -> float:
    """Token checks are cached for a few seconds (the proxy's 5 s, the API server's
    10 s): poll."""
    started = time.monotonic()
    while not is_revoked(call):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"still working after {timeout} s: {answer_of(call)}")
        time.sleep(0.5)
    return time.monotonic() - started


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


@pytest.fixture
def edit_role_aggregated(kube_app: FastAPI, runtime: VClusterRuntime, admin_api: Any) -> None:
    """The built-in edit role has rules only once the vCluster's aggregation controller
    ran."""
    reconcile_until(kube_app, lambda: all_ready(kube_app), timeout=120)
    rbac = client.RbacAuthorizationV1Api(vcluster_admin(runtime, admin_api, "nlp"))
    deadline = time.monotonic() + 60
    while not rbac.read_cluster_role("edit").rules:
        assert time.monotonic() < deadline, "clusterrole-aggregation did not fill edit"
        time.sleep(0.5)


def test_each_person_gets_their_own_expiring_revocable_credential(
    kube_app: FastAPI,
    runtime: VClusterRuntime,
    admin_api: Any,
    edit_role_aggregated: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    reconcile_until(kube_app, lambda: all_ready(kube_app))
    lead = client_for(kube_app, "lead-nlp@example.org")
    added = lead.api("POST", f"/api/v1/teams/{NLP}/members", {"email": MEMBER, "role": "member"})
    assert added.status_code == 201, added.text
    member = client_for(kube_app, MEMBER)

    issued_at = time.time()
    lead_file = download(lead, "2h")
    member_file = download(member, "1h")

    # Named after the team and the person; a token, never a client certificate.
    lead_config = yaml.safe_load(lead_file)
    assert lead_config["current-context"] == "nlp/lead-nlp@example.org"
    assert lead_config["clusters"][0]["name"] == "nlp"
    assert set(lead_config["users"][0]["user"]) == {"token"}
    assert "# Expires " in lead_file

    # TokenRequest honoured the chosen lifetimes (within a minute).
    assert abs(claims(lead_file)["exp"] - (issued_at + 2 * 3600)) < 60
    assert abs(claims(member_file)["exp"] - (issued_at + 3600)) < 60

    lead_api, member_api = api_for(lead_file, runtime), api_for(member_file, runtime)
    # No two people share a credential: the API server sees two different accounts.
    assert who(lead_api) != who(member_api)
    assert who(member_api).startswith("system:serviceaccount:gpu-portal-access:portal-user-")

    # The lead is cluster-admin inside; the member may deploy but not change RBAC.
    role = {"metadata": {"name": "lead-made"}, "rules": []}
    client.RbacAuthorizationV1Api(lead_api).create_cluster_role(role)
    apps = client.AppsV1Api(member_api)
    apps.create_namespaced_deployment("default", deployment("member-made"))
    refused = status_of(
        lambda: client.RbacAuthorizationV1Api(member_api).create_cluster_role(
            {"metadata": {"name": "member-made"}, "rules": []}
        )
    )
    assert refused == 403

    # The team page lists who holds a working kubeconfig, with its expiry.
    holders = lead.get(f"/api/v1/teams/{NLP}/kubeconfigs").json()
    assert {h["email"]: h["cluster_role"] for h in holders} == {
        "lead-nlp@example.org": "cluster-admin",
        MEMBER: "edit",
    }

    # Removing the member revokes their file (the sweeper deletes their account).
    member_id = added.json()["user_id"]
    assert lead.api("DELETE", f"/api/v1/teams/{NLP}/members/{member_id}").status_code == 204
    portal_of(kube_app).sweeper.run_once()
    list_pods = lambda: client.CoreV1Api(member_api).list_namespaced_pod("default")  # noqa: E731
    waited = wait_until_revoked(list_pods)
    assert waited < 20
    # The lead's file still works; "revoke my kubeconfigs" ends it too.
    assert status_of(lambda: client.CoreV1Api(lead_api).list_namespaced_pod("default")) == 200
    revoked = lead.api("POST", f"/api/v1/teams/{NLP}/kubeconfigs/revoke", {})
    assert revoked.json() == {"people": 1}
    portal_of(kube_app).sweeper.run_once()
    wait_until_revoked(lambda: client.CoreV1Api(lead_api).list_namespaced_pod("default"))
    # A new download works again, with a new account (the old token stays dead).
    fresh_api = api_for(download(lead, "1h"), runtime)
    assert status_of(lambda: client.CoreV1Api(fresh_api).list_namespaced_pod("default")) == 200
    assert is_revoked(lambda: client.CoreV1Api(lead_api).list_namespaced_pod("default"))

    # Audited: each issue with its expiry and token id, each revocation.
    with portal_of(kube_app).session_factory() as session:
        events = session.scalars(select(AuditEvent).order_by(AuditEvent.id)).all()
        grants = session.scalars(select(KubeconfigGrant)).all()
    issued = [e for e in events if e.action == "kubeconfig.issued"]
    assert [e.details["token_id"] for e in issued] == [g.token_id for g in grants]
    assert all(e.details["token_id"] and e.details["expires_at"] for e in issued)
    assert sum(e.action == "kubeconfig.revoked" for e in events) == 2

    # The vCluster's admin key is in no download, page, log line or database row.
    secret = client.CoreV1Api(admin_api).read_namespaced_secret("vc-nlp", "vcluster-nlp")
    pem = base64.b64decode(secret.data["client-key"]).decode()
    secrets = {pem.strip().splitlines()[1], base64.b64encode(pem.encode()).decode()[:40]}
    pages = lead.get(f"/teams/{NLP}").text + lead.get(f"/api/v1/teams/{NLP}").text
    rows = dump_database(kube_app)
    for text in (lead_file, member_file, pages, caplog.text, rows):
        assert not any(secret in text for secret in secrets)


def dump_database(app: FastAPI) -> str:
    metadata = MetaData()
    engine = portal_of(app).engine
    metadata.reflect(engine)
    with engine.connect() as connection:
        return "\n".join(
            repr(row)
            for table in metadata.sorted_tables
            for row in connection.execute(table.select())
        )


def test_a_member_who_changes_role_loses_the_old_credential(
    kube_app: FastAPI, runtime: VClusterRuntime, edit_role_aggregated: None
) -> None:
    reconcile_until(kube_app, lambda: all_ready(kube_app))
    lead = client_for(kube_app, "lead-nlp@example.org")
    email = "promoted-nlp@example.org"
    lead.api("POST", f"/api/v1/teams/{NLP}/members", {"email": email, "role": "member"})
    person = client_for(kube_app, email)
    as_member = api_for(download(person, "1h"), runtime)
    assert status_of(lambda: client.CoreV1Api(as_member).list_namespaced_pod("default")) == 200
    lead.api("POST", f"/api/v1/teams/{NLP}/members", {"email": email, "role": "lead"})
    portal_of(kube_app).sweeper.run_once()
    wait_until_revoked(lambda: client.CoreV1Api(as_member).list_namespaced_pod("default"))
    as_lead = api_for(download(person, "1h"), runtime)
    role = {"metadata": {"name": "promoted-made"}, "rules": []}
    client.RbacAuthorizationV1Api(as_lead).create_cluster_role(role)
