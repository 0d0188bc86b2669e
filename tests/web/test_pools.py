"""The node pools page: what the cluster holds in each pool beside what the admin set,
adding, changing and removing a pool, each refusal saying what to change; admins only."""

from __future__ import annotations

import re

from fastapi import FastAPI

from app.core.db import unit_of_work
from app.core.models import AuditEvent, Pool, Team
from app.core.quota import Quota
from app.runtime import portal_of
from app.teams import repository as repo
from tests.web.conftest import Client


def _cells(page: str, pool: str) -> dict[str, str]:
    row = re.search(rf'<tr data-pool="{pool}">(.*?)</tr>', page, re.S)
    assert row, f"a row for pool {pool}"
    return {
        name: " ".join(re.sub(r"<[^>]+>", " ", text).split())
        for name, text in re.findall(r'data-cell="([a-z]+)">(.*?)</td>', row.group(1), re.S)
    }


def test_the_example_org_has_the_default_pool_and_an_l40s_pool_with_what_the_cluster_holds(
    admin: Client,
) -> None:
    page = admin.get("/admin/pools")
    assert page.status_code == 200
    default = _cells(page.text, "default")
    assert default["cluster"].startswith("1 on 1 node")  # the simulated cluster: the pool's 1 GPU
    assert default["budget"] == "1 GPU"
    assert default["guaranteed"] == "0.99 GPU"  # three teams of 0.33
    l40s = _cells(page.text, "l40s")
    assert l40s == {
        "cluster": "4 on 1 node",
        "budget": "2 GPU",
        "guaranteed": "0 GPU",
        "price": "1.2",
    }
    assert "NVIDIA L40S" in page.text
    assert 'data-flag="no-nodes"' not in page.text


def test_a_pool_is_added_changed_and_removed_and_each_step_is_audited(
    admin: Client, app: FastAPI
) -> None:
    # Nodes labelled "a100" do not exist: the pool is added, and flagged.
    added = admin.form(
        "/admin/pools",
        {"label_value": "A100_old", "name": "a100", "gpus": "3", "gpu_type": "NVIDIA A100"},
        follow_redirects=True,
    )
    assert added.status_code == 200, added.text
    assert "Pool a100 added." in added.text
    assert 'data-flag="no-nodes"' in added.text
    assert _cells(added.text, "a100")["budget"] == "3 GPU"
    with unit_of_work(portal_of(app).session_factory) as session:
        pool = session.query(Pool).filter_by(name="a100").one()
        pool_id = pool.id
        assert (pool.label_value, pool.gpu_type, pool.capacity["gpu"]) == (
            "A100_old",
            "NVIDIA A100",
            300,
        )
    changed = admin.form(
        f"/admin/pools/{pool_id}", {"gpus": "2.5", "price": "0.9"}, follow_redirects=True
    )
    assert "Pool a100 changed." in changed.text
    assert _cells(changed.text, "a100")["budget"] == "2.5 GPU"
    assert _cells(changed.text, "a100")["price"] == "0.9"
    removed = admin.form(f"/admin/pools/{pool_id}/remove", follow_redirects=True)
    assert "Pool a100 removed." in removed.text
    assert 'data-pool="a100"' not in removed.text
    with unit_of_work(portal_of(app).session_factory) as session:
        summaries = [e.summary for e in session.query(AuditEvent).filter(
            AuditEvent.action.in_(("pool.created", "pool.updated", "pool.removed"))
        ).order_by(AuditEvent.id)][-3:]  # fmt: skip
    assert summaries == [
        "pool a100 added: nodes labelled A100_old, 3 GPU to guarantee",
        "pool a100: GPUs to guarantee 3 → 2.5; price a GPU-hour not set → 0.9",
        "pool a100 removed (nodes labelled A100_old)",
    ], summaries


def test_bad_pools_are_refused_with_what_to_change(admin: Client) -> None:
    page = admin.form("/admin/pools", {"label_value": "bad value!", "name": "L40S", "gpus": "x"})
    assert page.status_code == 422
    assert "a label value has at most 63 letters, digits" in page.text
    assert "use lowercase letters, digits and &#39;-&#39;" in page.text
    assert 'value="bad value!"' in page.text, "what was typed stays"
    taken = admin.form("/admin/pools", {"label_value": "l40s", "name": "other", "gpus": "1"})
    assert taken.status_code == 422
    assert "pool l40s already has the nodes labelled l40s" in taken.text
    default = admin.get("/admin/pools").text
    default_id = re.search(r'action="/admin/pools/(\d+)/remove"', default)
    assert default_id, "another pool can be removed"


def test_a_pool_teams_hold_quota_in_is_not_removed_and_its_budget_not_cut_below_them(
    admin: Client, app: FastAPI
) -> None:
    with unit_of_work(portal_of(app).session_factory) as session:
        org = repo.get_org(session)
        l40s = next(p for p in repo.get_pools(session, org.id) if p.name == "l40s")
        session.get_one(Team, 1).set_quota(l40s, Quota.of_gpu(150, 200))
        pool_id = l40s.id
        default_id = org.default_pool.id
    page = admin.form(f"/admin/pools/{pool_id}/remove", follow_redirects=True)
    assert (
        "Pool not removed: team nlp holds quota in pool l40s: set it to none there first"
        in page.text
    )
    page = admin.form(f"/admin/pools/{pool_id}", {"gpus": "1"})
    assert page.status_code == 422
    assert "1.5 GPU are already guaranteed to teams in pool l40s: enter at least 1.5" in page.text
    page = admin.form(f"/admin/pools/{default_id}/remove", follow_redirects=True)
    assert (
        "the default pool holds the nodes without a pool label and cannot be removed" in page.text
    )


def test_only_admins_see_or_change_pools(lead: Client, anonymous: Client) -> None:
    assert lead.get("/admin/pools").status_code == 403
    assert lead.form("/admin/pools", {"label_value": "x", "gpus": "1"}).status_code == 403
    assert anonymous.get("/admin/pools", follow_redirects=False).status_code in (303, 401)
    no_token = lead.post("/admin/pools", data={"label_value": "x", "gpus": "1"})
    assert no_token.status_code == 403


def test_the_api_lists_adds_changes_and_removes_pools(admin: Client, lead: Client) -> None:
    listed = lead.get("/api/v1/pools").json()
    assert [(p["name"], p["default"], p["label_value"]) for p in listed] == [
        ("default", True, ""),
        ("l40s", False, "l40s"),
    ]
    l40s = listed[1]
    assert l40s["budget"]["gpus"] == "2"
    assert l40s["cluster"] == {"nodes": 1, "gpus": 4.0, "gpu_product": "NVIDIA-L40S", "shard": True}
    assert (l40s["gpu_type"], l40s["price"], l40s["guaranteed_gpus"]) == ("NVIDIA L40S", "1.2", "0")
    refused = lead.api("POST", "/api/v1/pools", {"label_value": "a100", "gpus": "1"})
    assert refused.status_code == 403
    bad = admin.api("POST", "/api/v1/pools", {"label_value": "a100", "name": "A100", "gpus": "1"})
    assert bad.status_code == 422
    assert "use lowercase letters" in bad.json()["errors"]["name"]
    made = admin.api("POST", "/api/v1/pools", {"label_value": "a100", "gpus": "1.5"})
    assert made.status_code == 201, made.text
    pool = made.json()
    assert (pool["name"], pool["budget"]["gpus"], pool["cluster"], pool["no_nodes"]) == (
        "a100",
        "1.5",
        None,
        True,
    )
    changed = admin.api("PATCH", f"/api/v1/pools/{pool['id']}", {"price": "2", "gpu_type": "A100"})
    assert (changed.json()["price"], changed.json()["gpu_type"]) == ("2", "A100")
    assert changed.json()["budget"]["gpus"] == "1.5", "a field left out keeps its value"
    assert admin.api("DELETE", f"/api/v1/pools/{pool['id']}").status_code == 204
    assert [p["name"] for p in admin.get("/api/v1/pools").json()] == ["default", "l40s"]
