"""Personal kubeconfigs on the simulated backend: who holds one, revocation carried out
by the sweeper (also for events it never heard of), pending revocations shown, failures
retried, and the settings that bound a kubeconfig's life."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from fastapi import FastAPI
from pydantic import ValidationError
from sqlalchemy import delete, select, update

from app.access.credentials import Person
from app.access.sweeper import GRACE
from app.adapters.k8s.vcluster import control_plane_of
from app.adapters.k8s.vcluster_values import vcluster_values
from app.adapters.simulated import SimulatedBackend
from app.core.db import unit_of_work
from app.core.models import KubeconfigGrant, Step, Team, TeamMember, TemplateVersion, utcnow
from app.provisioning.backend import BackendError, spec_for
from app.runtime import portal_of
from app.teams import repository as repo
from tests.adapters.test_manifests import design_source_spec
from tests.conftest import settings_for
from tests.parts import simulated_backend
from tests.web.conftest import Client, client_for

NLP = 1
MEMBER_ID = 5


def token_of(text: str) -> str:
    return str(yaml.safe_load(text)["users"][0]["user"]["token"])


def download(person: Client, ttl: str = "1h") -> str:
    answer = person.api("POST", f"/api/v1/teams/{NLP}/kubeconfig?ttl={ttl}")
    assert answer.status_code == 200, answer.text
    return answer.text


def grants(app: FastAPI) -> list[KubeconfigGrant]:
    with portal_of(app).session_factory() as session:
        return list(session.scalars(select(KubeconfigGrant).order_by(KubeconfigGrant.id)))


def test_removal_revokes_and_the_sweeper_deletes_the_account(app: FastAPI, lead: Client) -> None:
    backend = simulated_backend(app)
    member = client_for(app, "member-nlp@example.org")
    token = token_of(download(member))
    assert backend.token_works("nlp", token)
    assert lead.api("DELETE", f"/api/v1/teams/{NLP}/members/{MEMBER_ID}").status_code == 204
    # Recorded at once: the holder list drops them before the vCluster is touched.
    assert lead.get(f"/api/v1/teams/{NLP}/kubeconfigs").json() == []
    assert backend.token_works("nlp", token)
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", token)
    (grant,) = grants(app)
    assert grant.revoked_reason == "no longer a member of the team"
    assert grant.removed_at is not None


def test_a_missed_event_is_caught_by_the_next_pass(app: FastAPI) -> None:
    """The membership vanishes without the service (a provider sync, a manual fix): the
    sweeper compares the records with who is allowed, not with events."""
    backend = simulated_backend(app)
    token = token_of(download(client_for(app, "member-nlp@example.org")))
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(delete(TeamMember).where(TeamMember.user_id == MEMBER_ID))
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", token)


def test_a_role_change_and_revoke_everyone(app: FastAPI, lead: Client) -> None:
    backend = simulated_backend(app)
    member = client_for(app, "member-nlp@example.org")
    member_token = token_of(download(member))
    lead_token = token_of(download(lead))
    # A member may not revoke everyone's; a lead may.
    refused = member.api("POST", f"/api/v1/teams/{NLP}/kubeconfigs/revoke", {"everyone": True})
    assert refused.status_code == 403
    promoted = lead.api(
        "POST", f"/api/v1/teams/{NLP}/members", {"email": "member-nlp@example.org", "role": "lead"}
    )
    assert promoted.status_code == 201
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", member_token)
    assert backend.token_works("nlp", lead_token)
    assert grants(app)[0].revoked_reason == "role changed to cluster-admin"
    new_member_token = token_of(download(member))
    assert "(role inside the vCluster: cluster-admin)" in download(member)
    everyone = lead.api("POST", f"/api/v1/teams/{NLP}/kubeconfigs/revoke", {"everyone": True})
    assert everyone.json() == {"people": 2}
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", lead_token)
    assert not backend.token_works("nlp", new_member_token)


def test_a_failed_revocation_is_shown_and_retried(
    app: FastAPI, lead: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = simulated_backend(app)
    token = token_of(download(client_for(app, "member-nlp@example.org")))
    real = backend.revoke_credentials

    def down(*args: object, **kwargs: object) -> None:
        raise BackendError("the vCluster API server did not answer")

    monkeypatch.setattr(backend, "revoke_credentials", down)
    lead.api("DELETE", f"/api/v1/teams/{NLP}/members/{MEMBER_ID}")
    portal_of(app).sweeper.run_once()
    assert backend.token_works("nlp", token)
    assert "did not answer" in portal_of(app).sweeper.errors[NLP]
    page = lead.get(f"/teams/{NLP}").text
    access = page.split('id="access"')[1].split("</section>")[0]
    assert "Revoking member-nlp@example.org's kubeconfig (no longer a member of the team)" in access
    assert "Last attempt failed, retrying: the vCluster API server did not answer" in access
    monkeypatch.setattr(backend, "revoke_credentials", real)
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", token)
    assert NLP not in portal_of(app).sweeper.errors
    assert "Revoking" not in lead.get(f"/teams/{NLP}").text


def test_expired_and_unknown_accounts_are_cleaned_up(app: FastAPI, lead: Client) -> None:
    backend = simulated_backend(app)
    download(lead)
    with portal_of(app).session_factory() as session:
        spec = spec_for(repo.get_team(session, NLP), repo.get_org(session))
    # An account made by a download whose transaction never committed.
    stray = Person(99, "stray@example.org", "member", "edit")
    backend.issue_credential(spec, stray, ttl_seconds=3600)
    portal_of(app).sweeper.run_once()
    names = {a.name for a in backend.credential_accounts(spec)}
    assert names == {"portal-user-2", "portal-user-99"}, "young unknown accounts wait"
    backend._accounts["nlp"]["portal-user-99"].created_at -= GRACE * 2
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(update(KubeconfigGrant).values(expires_at=utcnow() - timedelta(seconds=1)))
    portal_of(app).sweeper.run_once()
    assert backend.credential_accounts(spec) == []
    assert all(g.removed_at is not None for g in grants(app))


def test_decommissioning_revokes_every_kubeconfig(app: FastAPI, lead: Client) -> None:
    download(lead)
    lead.api("POST", f"/api/v1/teams/{NLP}/decommission")
    portal_of(app).sweeper.run_once()
    assert grants(app)[0].revoked_reason == "the team was decommissioned"


def test_kubeconfig_settings_say_what_to_change(db_url: str) -> None:
    with pytest.raises(ValidationError, match="PORTAL_KUBECONFIG_TTL must be a duration"):
        settings_for(db_url, kubeconfig_ttl="forever")
    with pytest.raises(ValidationError, match=r"\(30d\) is longer than PORTAL_KUBECONFIG_MAX_TTL"):
        settings_for(db_url, kubeconfig_ttl="30d")
    with pytest.raises(ValidationError, match="must be a duration from 10m"):
        settings_for(db_url, kubeconfig_max_ttl="5m")
    with pytest.raises(ValidationError, match="PORTAL_KUBECONFIG_MODE=oidc needs"):
        settings_for(db_url, kubeconfig_mode="oidc")
    with pytest.raises(ValidationError, match="PORTAL_KUBECONFIG_MEMBER_ROLE must be"):
        settings_for(db_url, kubeconfig_member_role="Edit Role")
    assert settings_for(db_url, kubeconfig_ttl="1h30m").kubeconfig_ttl_seconds == 5400


def test_oidc_mode_renders_the_api_server_flags_the_bindings_and_the_kubeconfig(
    db_url: str,
) -> None:
    settings = settings_for(
        db_url,
        kubeconfig_mode="oidc",
        oidc_issuer="https://id.example.org/realms/ml",
        oidc_client_id="portal",
        oidc_client_secret="s3cret-value",
        kubeconfig_oidc_client_id="kubectl",
    )
    backend = SimulatedBackend(step_seconds=0)
    spec = design_source_spec()
    values = vcluster_values(
        spec,
        expose="LoadBalancer",
        ingress_host=None,
        extra_sans=[],
        plane=control_plane_of(settings, "nlp"),
    )
    args = values["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"]
    assert "--oidc-issuer-url=https://id.example.org/realms/ml" in args
    assert "--oidc-client-id=kubectl" in args
    assert "--oidc-groups-prefix=oidc:" in args
    bindings = list(yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"]))
    assert {(b["subjects"][0]["name"], b["roleRef"]["name"]) for b in bindings} == {
        ("oidc:gpu-portal-admins", "cluster-admin"),
        ("oidc:gpu-team-nlp", "cluster-admin"),
    }
    backend.apply(Step.VCLUSTER, spec)
    text = backend.oidc_kubeconfig(
        spec,
        Person(1, "ann@example.org", "lead", "cluster-admin"),
        issuer="https://id.example.org/realms/ml",
        client_id="kubectl",
    )
    user = yaml.safe_load(text)["users"][0]["user"]
    assert user["exec"]["args"][:2] == ["oidc-login", "get-token"]
    assert "--oidc-client-id=kubectl" in user["exec"]["args"]
    assert "token" not in user
    assert "s3cret-value" not in text


def _legacy_version_without_its_new_parameter(app: FastAPI, team_name: str) -> int:
    """What publishing did before parameters were carried over: ``team_name`` wanted at a
    new version of its template that adds a parameter, its stored values without it."""
    with unit_of_work(portal_of(app).session_factory) as session:
        team = repo.get_live_team_by_name(session, team_name)
        assert team is not None
        assert team.template_version is not None
        old = team.template_version
        spec = dict(old.spec)
        spec["parameters"] = [
            *spec.get("parameters", []),
            {"name": "replicas", "label": "Replicas", "type": "integer", "default": "2"},
        ]
        spec["manifests"] = str(spec.get("manifests", "")) + (
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sizes\n"
            "  namespace: default\ndata:\n  replicas: '${replicas}'\n"
        )
        new = TemplateVersion(template_id=old.template_id, number=old.number + 1, spec=spec)
        session.add(new)
        session.flush()
        session.execute(update(Team).where(Team.id == team.id).values(template_version_id=new.id))
        return team.id


def test_a_team_on_a_version_with_a_new_parameter_stops_no_other_team(
    app: FastAPI, lead: Client
) -> None:
    """The defect: rendering a version that added a parameter raised for every team kept
    on the old values, and the sweeper stopped at that team on every pass, so a member
    removed from another team kept a working account."""
    backend = simulated_backend(app)
    recommender_lead = client_for(app, "lead-recommender@example.org")
    recommender = _legacy_version_without_its_new_parameter(app, "recommender")
    answer = recommender_lead.api("POST", f"/api/v1/teams/{recommender}/kubeconfig?ttl=1h")
    assert answer.status_code == 200, answer.text  # its grant comes first in the sweep
    assert recommender_lead.get(f"/teams/{recommender}").status_code == 200
    token = token_of(download(client_for(app, "member-nlp@example.org")))
    assert lead.api("DELETE", f"/api/v1/teams/{NLP}/members/{MEMBER_ID}").status_code == 204
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", token)
    assert portal_of(app).sweeper.errors == {}
    page = recommender_lead.get(f"/teams/{recommender}").text
    assert "replicas=2" in page  # the new parameter at its default
    with unit_of_work(portal_of(app).session_factory) as session:
        team = repo.get_team(session, recommender)
        from app.provisioning.specs import spec_of

        rendered = spec_of(session, team, portal_of(app).settings).template_manifests
    assert "replicas: '2'" in rendered


def test_one_teams_unexpected_failure_does_not_stop_the_sweep(
    app: FastAPI, lead: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.access.sweeper as sweeper_module

    backend = simulated_backend(app)
    recommender_lead = client_for(app, "lead-recommender@example.org")
    with unit_of_work(portal_of(app).session_factory) as session:
        found = repo.get_live_team_by_name(session, "recommender")
        assert found is not None
        recommender = found.id
    assert (
        recommender_lead.api("POST", f"/api/v1/teams/{recommender}/kubeconfig?ttl=1h").status_code
        == 200
    )
    token = token_of(download(client_for(app, "member-nlp@example.org")))
    from app.provisioning.specs import spec_of as real

    def broken_for_recommender(session: object, team: Team, *args: object, **kw: object) -> object:
        if team.id == recommender:
            raise KeyError("something no test foresaw")
        return real(session, team, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sweeper_module, "spec_of", broken_for_recommender)
    assert lead.api("DELETE", f"/api/v1/teams/{NLP}/members/{MEMBER_ID}").status_code == 204
    with unit_of_work(portal_of(app).session_factory) as session:
        session.execute(update(KubeconfigGrant).values(expires_at=utcnow() - timedelta(seconds=1)))
    portal_of(app).sweeper.run_once()
    assert not backend.token_works("nlp", token)
    assert portal_of(app).sweeper.errors == {recommender: "KeyError: 'something no test foresaw'"}
