"""Cluster templates through the pages and the API: kept by an admin (checked against the
real vCluster chart's schema), chosen with a parameter at request, read on the review
card and the team page, changed when approving, required by the org, rolled over the
teams that use it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.adapters.simulated import SimulatedBackend
from app.catalog import repository as catalog_repo
from app.core.db import unit_of_work
from app.core.models import AuditEvent, Team, TeamSchedule, utcnow
from app.main import create_app
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams.seed import seed_example
from tests.conftest import settings_for
from tests.shared import shared
from tests.web.conftest import client_for

CHART = shared("third_party/vcluster/vcluster-0.36.1.tgz")


@pytest.fixture
def app(db_url: str) -> Iterator[FastAPI]:
    """The example org, with the real vCluster chart archive as the chart source (its
    values.schema.json is what templates are checked against)."""
    settings = settings_for(db_url, vcluster_chart_repo=str(CHART), vcluster_chart_version="0.36.1")
    application = create_app(settings)
    with TestClient(application):
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
        portal_of(application).reconciler.run_once()
        yield application


def _ids(app: FastAPI) -> dict[str, int]:
    with unit_of_work(portal_of(app).session_factory) as session:
        return {o.template.name: o.template.id for o in _offered(session)}


def _offered(session: Any) -> list[Any]:
    from app.catalog import service as catalog

    return catalog.offered(session)


def _team(app: FastAPI, name: str) -> tuple[str | None, int | None, bool, dict[str, str]]:
    """A team's template name, version number, whether installed, and its parameters."""
    with unit_of_work(portal_of(app).session_factory) as session:
        team = repo.get_live_team_by_name(session, name)
        assert team is not None
        version = team.template_version
        return (
            version.template.name if version else None,
            version.number if version else None,
            team.template_installed_id == team.template_version_id,
            dict(team.template_parameters),
        )


def _settle(app: FastAPI, passes: int = 6) -> None:
    for _ in range(passes):
        portal_of(app).reconciler.run_once()


def test_the_example_org_has_the_design_sources_three_kinds(app: FastAPI) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    page = admin.get("/admin/templates").text
    names = re.findall(r'<tr data-template="([^"]+)">', page)
    assert names == ["bare", "crd-playground", "kubeflow-training"]  # the default first
    assert _team(app, "nlp") == ("crd-playground", 1, True, {})
    assert _team(app, "recommender") == ("kubeflow-training", 1, True, {"version": "v1.7.0"})
    lead = client_for(app, "lead-recommender@example.org")
    team_page = lead.get(f"/teams/{_team_id(app, 'recommender')}").text
    cluster = _between(team_page, 'data-quota="template"', "</dd>")
    assert "kubeflow-training" in cluster
    assert "v1" in cluster
    assert "version=v1.7.0" in cluster
    # Ready, and what its template puts inside not looked at yet: said so, not "in place".
    assert 'data-template-state="unchecked"' in cluster
    assert "installed; what it puts inside is checked shortly" in cluster
    _due_now(app)  # the pass a few seconds after ready
    _settle(app, passes=1)
    team_page = lead.get(f"/teams/{_team_id(app, 'recommender')}").text
    cluster = _between(team_page, 'data-quota="template"', "</dd>")
    assert 'data-template-state="installed"' in cluster
    assert 'data-template-state="installed">installed, all in place (checked <time' in cluster
    assert "CustomResourceDefinition pytorchjobs.kubeflow.org" in cluster
    # Wherever the quota is shown, the kind of cluster is too.
    overview = admin.get("/admin").text
    assert "data-row-template>crd-playground v1<" in overview
    assert "data-row-template>kubeflow-training v1<" in overview
    assert "data-row-template>bare v1<" in overview
    assert "data-card-template>kubeflow-training v1<" in lead.get("/teams").text
    api = lead.api("GET", f"/api/v1/teams/{_team_id(app, 'recommender')}").json()
    assert api["template"]["name"] == "kubeflow-training"
    assert api["template"]["parameters"] == {"version": "v1.7.0"}


def _team_id(app: FastAPI, name: str) -> int:
    with unit_of_work(portal_of(app).session_factory) as session:
        team = repo.get_live_team_by_name(session, name)
        assert team is not None
        return team.id


def _between(text: str, start: str, end: str) -> str:
    at = text.index(start)
    return text[at : text.index(end, at)]


def test_a_lead_requests_with_a_template_and_a_parameter_the_admin_reads_and_changes_it(
    app: FastAPI,
) -> None:
    ids = _ids(app)
    lead = client_for(app, "lead-new@example.org")
    form = lead.get("/teams/new").text
    # The default template is preselected; each template's parameters are under it.
    assert re.search(rf'name="template" value="{ids["bare"]}" checked', form)
    assert f'name="param-{ids["kubeflow-training"]}-version"' in form
    # A value outside the allowed list is refused with what to choose, nothing lost.
    refused = lead.form(
        "/teams",
        {
            "name": "speech",
            "gpu_quota": "0",
            "gpu_limit": "1",
            "template": str(ids["kubeflow-training"]),
            f"param-{ids['kubeflow-training']}-version": "v9",
        },
    )
    assert refused.status_code == 422
    assert "choose one of v1.8.1, v1.7.0" in refused.text
    assert 'value="speech"' in refused.text
    sent = lead.form(
        "/teams",
        {
            "name": "speech",
            "gpu_quota": "0",
            "gpu_limit": "1",
            "template": str(ids["kubeflow-training"]),
            f"param-{ids['kubeflow-training']}-version": "v1.7.0",
        },
        follow_redirects=False,
    )
    assert sent.status_code == 303, sent.text
    team_page = lead.get(sent.headers["location"]).text
    asked = _between(team_page, 'data-quota="template"', "</dd>")
    assert "kubeflow-training" in asked
    assert "version=v1.7.0" in asked

    admin = client_for(app, "admin@example.org", admin=True)
    cards = admin.get("/admin/requests").text
    card = _between(cards, "· speech", "</article>")
    shown = _between(card, 'data-asked="template"', "</dd>")
    assert "kubeflow-training" in shown
    assert "v1" in shown
    assert "version=v1.7.0" in shown
    found = re.search(r'action="/admin/requests/(\d+)/approve"', card)
    assert found is not None
    request_id = int(found.group(1))
    approved = admin.form(
        f"/admin/requests/{request_id}/approve",
        {
            "mode": "adjusted",
            "gpu_quota": "0",
            "gpu_limit": "1",
            "over_quota_weight": "1",
            "priority": "100",
            "template_choice": str(ids["crd-playground"]),
            "reason": "CRDs are enough for a start",
        },
        follow_redirects=False,
    )
    assert approved.status_code == 303, approved.text
    assert _team(app, "speech")[:2] == ("crd-playground", 1)
    body = admin.api("GET", f"/api/v1/requests/{request_id}").json()
    assert body["template"]["name"] == "kubeflow-training"
    assert body["template"]["parameters"] == {"version": "v1.7.0"}
    assert body["decision"]["template"]["name"] == "crd-playground"
    assert body["decision"]["changes"]["template"] == [
        "kubeflow-training v1 (version=v1.7.0)",
        "crd-playground v1",
    ]
    _settle(app)
    assert _team(app, "speech") == ("crd-playground", 1, True, {})
    page = lead.get(f"/teams/{_team_id(app, 'speech')}").text
    assert "Namespace playground" in _between(page, 'data-quota="template"', "</dd>")


def test_what_a_template_may_not_set_is_refused_with_why(app: FastAPI) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    off = {"vcluster_values": {"sync": {"toHost": {"pods": {"enabled": False}}}}}
    refused = admin.api("POST", "/api/v1/templates", {"name": "unpinned", "spec": off})
    assert refused.status_code == 422
    assert "the portal syncs pods itself" in refused.text
    proxies = {"vcluster_values": {"networking": {"advanced": {"proxyKubelets": {"byIP": True}}}}}
    refused = admin.api("POST", "/api/v1/templates", {"name": "proxied", "spec": proxies})
    assert refused.status_code == 422
    assert "nodes/proxy" in refused.text
    # The chart's own schema refuses what it does not know (a typo under an allowed key).
    typo = {"vcluster_values": {"controlPlane": {"statefulSet": {"persistence": {"size": 5}}}}}
    refused = admin.api("POST", "/api/v1/templates", {"name": "typo", "spec": typo})
    assert refused.status_code == 422
    assert "the vCluster chart refuses it" in refused.text
    # The same through the page: the form again, with every reason.
    page = admin.form(
        "/admin/templates",
        {"name": "unpinned", "spec": yaml.safe_dump(off)},
    )
    assert page.status_code == 422
    assert "the portal syncs pods itself" in page.text
    assert "enabled: false" in page.text  # what was typed is kept
    memory = {
        "vcluster_values": {
            "controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "6Gi"}}}}
        }
    }
    created = admin.api("POST", "/api/v1/templates", {"name": "big-plane", "spec": memory})
    assert created.status_code == 201, created.text
    assert created.json()["latest"]["number"] == 1
    with unit_of_work(portal_of(app).session_factory) as session:
        actions = [e.action for e in session.query(AuditEvent).order_by(AuditEvent.id)]
    assert actions[-1] == "template.created"


def test_the_request_form_offers_one_plain_choice(app: FastAPI) -> None:
    """The example org's bare template installs nothing: it is the form's only "nothing
    inside" choice (no second "Plain vCluster" that means the same), and the default."""
    form = client_for(app, "lead-new@example.org").get("/teams/new").text
    assert "Plain vCluster" not in form
    assert 'name="template" value=""' not in form
    bare = re.search(
        r'<input type="radio" name="template" value="\d+" ([^>]*)data-template-name="bare"', form
    )
    assert bare
    assert "checked" in bare.group(1)
    assert "nothing installed inside (a plain vCluster)" in form


def test_the_org_may_require_a_template_for_non_admins(app: FastAPI) -> None:
    admin = client_for(app, "admin@example.org", admin=True)
    admin.form("/admin/templates/required", {"required": "on"})
    lead = client_for(app, "lead-new@example.org")
    form = lead.get("/teams/new").text
    assert "Plain vCluster" not in form
    refused = lead.api(
        "POST", "/api/v1/requests", {"name": "plain", "gpu_quota": "0", "gpu_limit": "1"}
    )
    assert refused.status_code == 422
    assert "the org requires one" in refused.text
    # An admin still may.
    allowed = admin.api(
        "POST", "/api/v1/requests", {"name": "plain", "gpu_quota": "0", "gpu_limit": "1"}
    )
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["template"] is None


def test_a_new_version_rolls_over_the_teams_that_use_it(app: FastAPI) -> None:
    ids = _ids(app)
    admin = client_for(app, "admin@example.org", admin=True)
    # A second team on crd-playground, beside nlp.
    lead = client_for(app, "lead-new@example.org")
    made = lead.api(
        "POST",
        "/api/v1/requests",
        {
            "name": "speech",
            "gpu_quota": "0",
            "gpu_limit": "1",
            "template_id": ids["crd-playground"],
        },
    )
    assert made.status_code == 201, made.text
    assert admin.api("POST", f"/api/v1/requests/{made.json()['id']}/approve", {}).status_code == 200
    _settle(app)
    assert _team(app, "speech")[:3] == ("crd-playground", 1, True)
    versions = f"/api/v1/templates/{ids['crd-playground']}/versions"
    spec = admin.api("GET", f"/api/v1/templates/{ids['crd-playground']}").json()["latest"]["spec"]
    same = admin.api("POST", versions, {"spec": spec})
    assert same.status_code == 422
    assert "this is version 1 as it stands" in same.text
    spec["manifests"] += "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: scratch\n"
    published = admin.api("POST", versions, {"spec": spec, "note": "a scratch namespace"})
    assert published.status_code == 201, published.text
    number = published.json()["latest"]["number"]
    # Both teams are now wanted at the new version, not yet installed with it.
    assert _team(app, "nlp")[:3] == ("crd-playground", number, False)
    assert _team(app, "speech")[:3] == ("crd-playground", number, False)
    page = admin.get(f"/admin/templates/{ids['crd-playground']}").text
    assert f'data-testid="latest">v{number}<' in page
    assert 'data-testid="teams">2<' in page
    # The version says what changed from the one before it: the lines added, in place.
    changes = _between(page, f'data-version-changes="{number}"', "</details>")
    assert f"What changed from v{number - 1}" in changes
    added = re.findall(
        r'<span class="diff-add"><span class="sr-only">added: </span>(.*?)</span>', changes
    )
    assert added == [
        "+  ---",
        "+  apiVersion: v1",
        "+  kind: Namespace",
        "+  metadata:",
        "+    name: scratch",
    ]
    assert 'class="diff-del"' not in changes
    assert 'data-version-changes="1"' not in page, "the first version changed nothing"
    # The Pool page's rollout card counts them as behind, and says it is a template's.
    pool = admin.get("/admin").text
    assert f"Rollout: template crd-playground v{number}<" in pool
    assert "data-rollout-count>2 of 4 teams<" in pool
    _settle(app, passes=10)
    assert 'id="rollout-title"' not in admin.get("/admin").text
    assert _team(app, "nlp")[:3] == ("crd-playground", number, True)
    assert _team(app, "speech")[:3] == ("crd-playground", number, True)
    with unit_of_work(portal_of(app).session_factory) as session:
        upgraded = [
            e.summary
            for e in session.query(AuditEvent).filter(AuditEvent.action == "vcluster.upgraded")
        ]
    assert sorted(upgraded) == [
        f"nlp's vCluster upgraded to chart 0.36.1 with template crd-playground v{number}",
        f"speech's vCluster upgraded to chart 0.36.1 with template crd-playground v{number}",
    ]
    # One line when the rollout starts and one when it is done, besides each team's.
    assert _audited(app, "vcluster.rollout_started") == [
        "vCluster rollout to chart 0.36.1 started: 2 teams to move, one at a time"
    ]
    assert _audited(app, "vcluster.rollout_done") == [
        "vCluster rollout to chart 0.36.1 done: every team is on it and on its template's "
        "version (2 upgraded in turn so far)"
    ]


def _audited(app: FastAPI, action: str) -> list[str]:
    with portal_of(app).session_factory() as session:
        found = session.query(AuditEvent).filter(AuditEvent.action == action)
        return [e.summary for e in found.order_by(AuditEvent.id)]


def test_a_template_that_waits_for_leads_moves_when_a_lead_accepts(app: FastAPI) -> None:
    ids = _ids(app)
    admin = client_for(app, "admin@example.org", admin=True)
    tid = ids["kubeflow-training"]
    admin.form(
        f"/admin/templates/{tid}/settings",
        {"description": "Kubeflow", "leads_accept": "on"},
    )
    spec = admin.api("GET", f"/api/v1/templates/{tid}").json()["latest"]["spec"]
    spec["parameters"][0]["allowed"].append("v1.9.0")
    assert admin.api("POST", f"/api/v1/templates/{tid}/versions", {"spec": spec}).status_code == 201
    assert _team(app, "recommender")[:3] == ("kubeflow-training", 1, True)  # stays
    lead = client_for(app, "lead-recommender@example.org")
    team_id = _team_id(app, "recommender")
    page = lead.get(f"/teams/{team_id}").text
    assert "kubeflow-training v2</b> is published" in page
    assert f'action="/teams/{team_id}/template/accept"' in page
    # Every setting of v2 may be chosen at the move, starting at what the team has now.
    choice = _between(page, 'data-choice="version"', "</p>")
    assert '<option value="v1.7.0" selected>v1.7.0 (now)</option>' in choice
    assert '<option value="v1.9.0">v1.9.0</option>' in choice
    assert "now v1.7.0; v2 offers v1.8.1, v1.7.0, v1.9.0" in choice
    # Another team's lead cannot move it.
    other = client_for(app, "lead-nlp@example.org")
    assert other.form(f"/teams/{team_id}/template/accept").status_code == 404
    moved = lead.form(
        f"/teams/{team_id}/template/accept", {"param-version": "v1.9.0"}, follow_redirects=False
    )
    assert moved.status_code == 303
    assert _team(app, "recommender") == ("kubeflow-training", 2, False, {"version": "v1.9.0"})
    _settle(app, passes=10)
    assert _team(app, "recommender")[:3] == ("kubeflow-training", 2, True)
    # What was found in place of v1 says nothing of v2: not "in place" until v2 is
    # checked, at a pass a few seconds later.
    cluster = _between(lead.get(f"/teams/{team_id}").text, 'data-quota="template"', "</dd>")
    assert 'data-template-state="unchecked"' in cluster, cluster
    with portal_of(app).session_factory() as session:
        due = repo.get_team(session, team_id).next_attempt_at
        assert due is not None
        assert (due - utcnow()).total_seconds() <= 10
    _due_now(app)
    _settle(app, passes=1)
    cluster = _between(lead.get(f"/teams/{team_id}").text, 'data-quota="template"', "</dd>")
    assert 'data-template-state="installed">installed, all in place' in cluster, cluster
    # The portal's own move is no drift: not at the move, nor at the resync after.
    _due_now(app)
    _settle(app, passes=2)
    assert _repairs(app) == []
    # Decommissioned: nothing of it is "installed" any more.
    lead.form(f"/teams/{team_id}/decommission", {"confirm": "recommender"})
    cluster = _between(lead.get(f"/teams/{team_id}").text, 'data-quota="template"', "</dd>")
    assert 'data-template-state="removed">removed with the cluster<' in cluster, cluster


def test_a_template_is_rendered_into_the_vclusters_values(app: FastAPI) -> None:
    from app.adapters.k8s.vcluster_values import ControlPlane, OidcSignIn, vcluster_values
    from app.provisioning.specs import spec_of

    with unit_of_work(portal_of(app).session_factory) as session:
        team: Team | None = repo.get_live_team_by_name(session, "recommender")
        assert team is not None
        spec = spec_of(session, team, portal_of(app).settings)
        assert catalog_repo.get_version(session, spec.template_version_id or 0).number == 1
    oidc = OidcSignIn(
        "https://id.example.org", "portal", "groups", "admins", "recommender", "admin", "edit"
    )
    values = vcluster_values(
        spec, expose="LoadBalancer", ingress_host=None, extra_sans=[], plane=ControlPlane(oidc=oidc)
    )
    deploy = values["experimental"]["deploy"]["vcluster"]
    docs = [d for d in yaml.safe_load_all(deploy["manifests"]) if d]
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    # The portal's own bindings first, then the template's objects with the lead's value.
    assert kinds == [
        ("ClusterRoleBinding", "gpu-portal:oidc-admins"),
        ("ClusterRoleBinding", "gpu-portal:oidc-leads"),
        ("Namespace", "kubeflow"),
        ("CustomResourceDefinition", "pytorchjobs.kubeflow.org"),
    ]
    assert docs[2]["metadata"]["labels"] == {"training-operator.kubeflow.org/version": "v1.7.0"}
    # What the portal owns stays as it writes it.
    assert values["sync"]["toHost"]["pods"] == {"useSecretsForSATokens": True}
    assert values["networking"]["advanced"]["proxyKubelets"] == {"byHostname": False, "byIP": False}


def _due_now(app: FastAPI) -> None:
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))


def test_what_a_template_installs_is_checked_inside_and_put_back_if_it_says_so(
    app: FastAPI,
) -> None:
    backend = portal_of(app).backend
    assert isinstance(backend, SimulatedBackend)
    _due_now(app)
    _settle(app, passes=1)
    lead = client_for(app, "lead-nlp@example.org")
    page = lead.get(f"/teams/{_team_id(app, 'nlp')}").text
    assert "installed, all in place (checked" in _between(page, 'data-quota="template"', "</dd>")
    # crd-playground puts back what a lead deletes inside.
    backend.delete_template_object("nlp", "CustomResourceDefinition experiments.nlp.example.org")
    # kubeflow-training does not: it is reported.
    backend.delete_template_object("recommender", "Namespace kubeflow")
    _due_now(app)
    _settle(app, passes=1)
    with unit_of_work(portal_of(app).session_factory) as session:
        events = {
            e.action: e.summary
            for e in session.query(AuditEvent).filter(
                AuditEvent.action.in_(["provisioning.drift_repaired", "template.drifted"])
            )
        }
    assert events == {
        "provisioning.drift_repaired": "restored nlp: template: CustomResourceDefinition "
        "experiments.nlp.example.org put back",
        "template.drifted": "recommender's vCluster lacks what its template installs: "
        "Namespace kubeflow",
    }
    page = lead.get(f"/teams/{_team_id(app, 'nlp')}").text
    assert 'data-template-state="installed"' in page
    other = client_for(app, "lead-recommender@example.org")
    page = other.get(f"/teams/{_team_id(app, 'recommender')}").text
    shown = _between(page, 'data-template-state="drifted"', "</small>")
    assert "missing inside: Namespace kubeflow (this template does not put it back)" in shown
    # Reported once, not on every pass.
    _due_now(app)
    _settle(app, passes=1)
    with unit_of_work(portal_of(app).session_factory) as session:
        drifted = session.query(AuditEvent).filter(AuditEvent.action == "template.drifted")
        assert drifted.count() == 1


def test_an_admin_may_change_only_a_parameter_when_approving(app: FastAPI) -> None:
    ids = _ids(app)
    tid = ids["kubeflow-training"]
    lead = client_for(app, "lead-new@example.org")
    made = lead.api(
        "POST",
        "/api/v1/requests",
        {
            "name": "speech",
            "gpu_quota": "0",
            "gpu_limit": "1",
            "template_id": tid,
            "parameters": {"version": "v1.7.0"},
        },
    )
    assert made.status_code == 201, made.text
    request_id = made.json()["id"]
    admin = client_for(app, "admin@example.org", admin=True)
    card = _between(admin.get("/admin/requests").text, "· speech", "</article>")
    # The card offers the asked template's parameters with the asked value.
    field = _between(card, f'name="param-{tid}-version"', "</select>")
    assert '<option value="v1.7.0" selected>' in field
    fields = {
        "mode": "adjusted",
        "gpu_quota": "0",
        "gpu_limit": "1",
        "over_quota_weight": "1",
        "priority": "100",
        "template_choice": "",
        f"param-{tid}-version": "v1.9.9",
    }
    refused = admin.form(f"/admin/requests/{request_id}/approve", fields)
    assert refused.status_code == 422
    assert "choose one of v1.8.1, v1.7.0" in refused.text
    fields[f"param-{tid}-version"] = "v1.8.1"
    approved = admin.form(f"/admin/requests/{request_id}/approve", fields, follow_redirects=False)
    assert approved.status_code == 303, approved.text
    assert _team(app, "speech")[3] == {"version": "v1.8.1"}
    changes = admin.api("GET", f"/api/v1/requests/{request_id}").json()["decision"]["changes"]
    assert changes == {
        "template": [
            "kubeflow-training v1 (version=v1.7.0)",
            "kubeflow-training v1 (version=v1.8.1)",
        ]
    }


def test_the_api_changes_settings_and_the_org_requirement(app: FastAPI) -> None:
    ids = _ids(app)
    admin = client_for(app, "admin@example.org", admin=True)
    changed = admin.api(
        "PATCH", f"/api/v1/templates/{ids['kubeflow-training']}", {"is_default": True}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["is_default"] is True
    listed = [t["name"] for t in admin.api("GET", "/api/v1/templates").json()]
    assert listed[0] == "kubeflow-training"  # the default first; bare is not the default now
    assert admin.api("GET", "/api/v1/templates").json()[1]["is_default"] is False
    assert admin.api("PUT", "/api/v1/templates-required", {"required": True}).json() == {
        "required": True
    }
    lead = client_for(app, "lead-new@example.org")
    refused = lead.api(
        "POST", "/api/v1/requests", {"name": "x", "gpu_quota": "0", "gpu_limit": "1"}
    )
    assert refused.status_code == 422
    with unit_of_work(portal_of(app).session_factory) as session:
        actions = [
            e.action
            for e in session.query(AuditEvent).order_by(AuditEvent.id)
            if e.action.startswith("template.") and e.actor == "admin@example.org"
        ]
    assert actions[-2:] == ["template.changed", "template.required"]


def _publish_with(admin: Any, tid: int, change: Any) -> Any:
    spec = admin.api("GET", f"/api/v1/templates/{tid}").json()["latest"]["spec"]
    change(spec)
    return admin.api("POST", f"/api/v1/templates/{tid}/versions", {"spec": spec})


def _adds_replicas(spec: dict[str, Any]) -> None:
    spec["parameters"].append(
        {"name": "replicas", "label": "Replicas", "type": "integer", "default": "2"}
    )
    spec["manifests"] += (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sizes\n"
        "  namespace: kubeflow\ndata:\n  replicas: '${replicas}'\n"
    )


def _published_summary(app: FastAPI) -> str:
    with unit_of_work(portal_of(app).session_factory) as session:
        event = session.query(AuditEvent).filter(AuditEvent.action == "template.published")
        return str(event.order_by(AuditEvent.id.desc()).first().summary)  # type: ignore[union-attr]


def test_a_version_that_adds_a_parameter_moves_teams_with_its_default(app: FastAPI) -> None:
    ids = _ids(app)
    admin = client_for(app, "admin@example.org", admin=True)
    tid = ids["kubeflow-training"]
    published = _publish_with(admin, tid, _adds_replicas)
    assert published.status_code == 201, published.text
    assert _team(app, "recommender") == (
        "kubeflow-training",
        2,
        False,
        {"version": "v1.7.0", "replicas": "2"},
    )
    assert "new parameters start at their defaults: Replicas = 2" in _published_summary(app)
    lead = client_for(app, "lead-recommender@example.org")
    team_id = _team_id(app, "recommender")
    page = lead.get(f"/teams/{team_id}")
    assert page.status_code == 200
    assert "replicas=2" in _between(page.text, 'data-quota="template"', "</dd>")
    _settle(app, passes=10)
    assert _team(app, "recommender")[:3] == ("kubeflow-training", 2, True)
    team = lead.api("GET", f"/api/v1/teams/{team_id}").json()
    assert team["status"] == "ready"
    assert team["template"]["parameters"] == {"version": "v1.7.0", "replicas": "2"}
    assert lead.api("POST", f"/api/v1/teams/{team_id}/kubeconfig?ttl=1h").status_code == 200
    # A publish rolled out by the portal is no drift, at the upgrade or the resync after.
    _due_now(app)
    _settle(app, passes=2)
    assert _repairs(app) == []


def _repairs(app: FastAPI) -> list[str]:
    with portal_of(app).session_factory() as session:
        found = session.query(AuditEvent).filter(AuditEvent.action == "provisioning.drift_repaired")
        return [e.summary for e in found]


def test_a_version_that_refuses_a_teams_value_leaves_the_team_where_it_is(app: FastAPI) -> None:
    ids = _ids(app)
    admin = client_for(app, "admin@example.org", admin=True)
    tid = ids["kubeflow-training"]

    def only_newer(spec: dict[str, Any]) -> None:
        spec["parameters"][0]["allowed"] = ["v1.9.0"]
        spec["parameters"][0]["default"] = "v1.9.0"

    assert _publish_with(admin, tid, only_newer).status_code == 201
    assert _team(app, "recommender") == ("kubeflow-training", 1, True, {"version": "v1.7.0"})
    assert (
        "1 team stays on v1, the new version refusing their values (recommender: "
        "Training Operator version: 'v1.7.0' — choose one of v1.9.0)"
    ) in _published_summary(app)
    # A template that waits for leads: accepting says what the new version refuses.
    admin.form(f"/admin/templates/{tid}/settings", {"description": "K", "leads_accept": "on"})
    assert _publish_with(admin, tid, _adds_replicas).status_code == 201
    lead = client_for(app, "lead-recommender@example.org")
    team_id = _team_id(app, "recommender")
    refused = lead.api("POST", f"/api/v1/teams/{team_id}/template/accept")
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"] == (
        "kubeflow-training v3 does not allow what recommender chose (Training Operator "
        "version: 'v1.7.0' — choose one of v1.9.0): choose an allowed value when moving, "
        "or ask an admin to allow it"
    )
    page = lead.form(f"/teams/{team_id}/template/accept")
    assert "does not allow what recommender chose" in page.text
    assert _team(app, "recommender") == ("kubeflow-training", 1, True, {"version": "v1.7.0"})
    # The move offers the new choices: what v3 adds, and a value for what it refuses.
    card = _between(lead.get(f"/teams/{team_id}").text, 'id="template-newer"', "</form>")
    assert 'data-choice="version"' in card
    assert "v3 no longer allows v1.7.0: choose another" in card
    assert '<option value="v1.9.0" selected>v1.9.0</option>' in card
    assert 'data-choice="replicas"' in card
    assert "new in v3; its default is 2" in card
    wrong = lead.api(
        "POST", f"/api/v1/teams/{team_id}/template/accept", {"parameters": {"colour": "red"}}
    )
    assert wrong.status_code == 422
    assert wrong.json()["errors"] == {
        "parameters.colour": "kubeflow-training v3 has no such parameter"
    }
    moved = lead.form(
        f"/teams/{team_id}/template/accept",
        {"param-version": "v1.9.0", "param-replicas": "4"},
        follow_redirects=False,
    )
    assert moved.status_code == 303
    assert _team(app, "recommender") == (
        "kubeflow-training",
        3,
        False,
        {"version": "v1.9.0", "replicas": "4"},
    )


def test_an_admins_yaml_with_aliases_is_refused_before_it_expands(app: FastAPI) -> None:
    """552 characters of nested aliases once became a 5 MB spec served to everyone."""
    admin = client_for(app, "admin@example.org", admin=True)
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for number, name in enumerate("bcdefgh"):
        before = "abcdefgh"[number]
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{before}"] * 9) + "]")
    spec = "default_quota: {}\nextra:\n  " + "\n  ".join(levels) + "\n"
    page = admin.form("/admin/templates", {"name": "bomb", "description": "", "spec": spec})
    assert page.status_code == 422
    assert "anchors and aliases (&amp;name, *name) are not accepted" in page.text
    assert "bomb" not in _ids(app)
    assert len(admin.get("/api/v1/templates").content) < 20_000
