"""A resource added to the quota's declaration, and nothing else changed, reaches the
request form, the API, the review card, the team's quota card, the messages, the
queue the portal writes, its own division and the team's gauge of it; its amounts are
stored as lines of the team's pool (no migration). A pool added to the data, with
teams' lines in it, is divided on its own and gauged the same way. The declaration is
read when the portal's modules load, so the portal runs in a process of its own whose
declaration holds one more resource."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PORTAL_WITH_DISK = """
import json, re, sys
from dataclasses import asdict
from app.core import quota

DISK = quota.Resource(
    key="disk", name="Disk", unit="GB", scale=10, kai_scale=1.0, required=False,
    limited=True, pool_field="disk_gb", pool_label="disk (GB)", divided=True,
)
quota.RESOURCES = (*quota.RESOURCES, DISK)

from fastapi.testclient import TestClient
from app.cli import migrate
from app.core.db import unit_of_work
from app.core.models import AuditEvent, Pool, Team
from app.core.quota import Quota
from app.reads.org import other_shares
from app.main import create_app
from app.provisioning.backend import spec_for
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams.seed import seed_example
from tests.conftest import settings_for
from tests.web.conftest import client_for

settings = settings_for("sqlite:///" + sys.argv[1])
migrate(settings)
app = create_app(settings)
seen = {}
with TestClient(app):
    factory = portal_of(app).session_factory
    with unit_of_work(factory) as session:
        seed_example(session)
    admin = client_for(app, "admin@example.org", admin=True)
    lead = client_for(app, "lead-speech@example.org")
    form = lead.get("/teams/new").text
    seen["form"] = ['name="disk_quota"' in form, 'name="disk_limit"' in form,
                    "Disk guarantee (GB)" in form, "Disk limit (GB)" in form]
    refused = lead.api("POST", "/api/v1/requests", {
        "name": "speech", "gpu_quota": "0.01", "gpu_limit": "1",
        "disk_quota": "20", "disk_limit": "10"})
    seen["refused"] = refused.json().get("errors", {})
    made = lead.api("POST", "/api/v1/requests", {
        "name": "speech", "gpu_quota": "0.01", "gpu_limit": "1",
        "disk_quota": "20", "disk_limit": "50"})
    seen["status"] = made.status_code
    body = made.json()
    seen["requested"] = {k: v for k, v in body["requested"].items() if k.startswith("disk")}
    seen["pools"] = body["requested"]["pools"]["default"].get("disk")
    card = admin.get("/admin/requests").text
    seen["card"] = ['data-asked="disk_quota"' in card, "Disk guarantee" in card,
                    "20 GB" in card, "50 GB" in card]
    approved = admin.api("POST", f"/api/v1/requests/{body['id']}/approve", {})
    seen["approved"] = approved.status_code
    page = lead.get(f"/teams/{body['team_id']}").text
    seen["quota_card"] = 'data-quota="disk_quota"' in page and "Disk limit" in page
    with unit_of_work(factory) as session:
        team = session.get_one(Team, body["team_id"])
        spec = spec_for(team, repo.get_org(session))
        seen["queue"] = asdict(dict(spec.resources)["disk"])
        seen["lines"] = sorted(line.resource for line in team.quota_lines)
        summaries = [e.summary for e in session.query(AuditEvent).all()]
        org = repo.get_org(session)
        org.set_capacity({**org.capacity, "disk": 100_000})  # a 100 GB pool of disk
        # A second pool, of 2 GPUs, where the new team and the NLP team hold a line each.
        h200 = Pool(name="h200", label_value="h200")
        h200.set_capacity({"gpu": 200})
        org.pools.append(h200)
        session.flush()
        team.set_quota(h200, Quota.of_gpu(50, 200))
        nlp = session.query(Team).filter_by(name="nlp").one()
        nlp.set_quota(h200, Quota.of_gpu(150, 200, weight=300))
    seen["message"] = [s for s in summaries if "speech" in s and "disk" in s]
    portal_of(app).usage_cache.forget_quotas()  # as a decision's effect would
    page = lead.get(f"/teams/{body['team_id']}").text
    seen["gauges"] = {
        key: re.findall(r'data-gauge="(guaranteed|limit)">([^<]*)<', part.split("</figure>")[0])
        + re.findall(r"of ([0-9.]+ [A-Za-z]+) pool", part.split("</figure>")[0])
        for key, part in re.findall(r'data-key="([^"]+)"(.*?)(?=data-key=|$)', page, re.S)
    }
    with unit_of_work(factory) as session:
        org = repo.get_org(session)
        seen["divisions"] = {
            k.key.describe(): [k.share.guaranteed, k.share.limit, k.share.if_all_busy, k.share.pool]
            for k in other_shares(session, portal_of(app).usage_cache, org, body["team_id"])
            if k.share is not None
        }
print(json.dumps(seen))
"""


def test_a_resource_added_to_the_declaration_is_asked_shown_stored_and_written(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PORTAL_WITH_DISK, str(tmp_path / "portal.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["form"] == [True, True, True, True], "the request form asks for it"
    assert seen["refused"] == {
        "disk_limit": "the limit (10 GB) cannot be below the guarantee (20 GB): raise the "
        "limit or lower the guarantee"
    }, "the one rule checks it"
    assert seen["status"] == 201
    assert seen["requested"] == {"disk_quota": "20", "disk_limit": "50"}, "the API's fields"
    assert seen["pools"] == {"guarantee": "20", "limit": "50", "weight": "1"}
    assert seen["card"] == [True, True, True, True], "the review card shows it"
    assert seen["approved"] == 200
    assert seen["quota_card"], "the team's quota card shows it"
    assert seen["queue"] == {"quota": 20000.0, "limit": 50000.0, "over_quota_weight": 1.0}
    assert seen["lines"] == ["disk", "gpu"], "stored as a line of the team's pool"
    assert any("20 GB disk" in line for line in seen["message"]), seen["message"]
    assert seen["gauges"] == {
        "Disk": [["guaranteed", "20"], ["limit", "50"], "100 GB"],
        "GPU in pool h200": [["guaranteed", "0.5"], ["limit", "2"], "2 GPU"],
    }, "a gauge per key the team holds, each against its own pool"
    # Each key its own division, KAI's algorithm over every team holding it: in the
    # 2-GPU pool, if both teams were busy, the new team keeps its 0.5 and the NLP team
    # its 1.5 (nothing is left over); alone in the disk pool the team may use its limit.
    assert seen["divisions"] == {
        "Disk": [20.0, 50.0, 50.0, 100.0],
        "GPU in pool h200": [0.5, 2.0, 0.5, 2.0],
    }
