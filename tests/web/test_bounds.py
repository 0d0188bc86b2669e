"""Every bound comes from the models: each edge is tried on both databases, and the answer is
a clear 4xx, never a database error."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.core.models import ApiToken, User
from app.core.quantities import DB_INT_MAX, QUANTITY_MAX
from app.main import ROUTERS
from app.teams.rules import PURPOSE_MAX, REASON_MAX
from tests.web.conftest import Client, client_for


def length_of(column: object) -> int:
    length = getattr(getattr(column, "type", None), "length", None)
    assert isinstance(length, int)
    return length


def id_routes() -> list[tuple[str, str]]:
    """Every route with an id in its path, as (method, path)."""
    found: list[tuple[str, str]] = []
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            if re.search(r"\{\w+_id\}", route.path):
                found.extend((m, route.path) for m in sorted(route.methods or ()) if m != "HEAD")
    return found


@pytest.mark.parametrize(("method", "path"), id_routes())
def test_ids_beyond_the_integer_column_are_a_clear_422(
    admin: Client, method: str, path: str
) -> None:
    largest = re.sub(r"\{\w+_id\}", str(DB_INT_MAX), path)
    beyond = re.sub(r"\{\w+_id\}", str(DB_INT_MAX + 1), path)
    body: dict[str, str] | None = {} if path.startswith("/api/") and method != "GET" else None
    headers = {"X-CSRF-Token": admin.csrf}
    fits = admin.request(method, largest, headers=headers, json=body, follow_redirects=False)
    assert fits.status_code in (303, 404, 422), (largest, fits.text[:300])
    if fits.status_code == 422:  # a body field was missing, not the id
        assert str(DB_INT_MAX) not in fits.text
    too_big = admin.request(method, beyond, headers=headers, json=body, follow_redirects=False)
    assert too_big.status_code == 422, (beyond, too_big.text[:300])
    assert f"less than or equal to {DB_INT_MAX}" in too_big.text


def test_e_mail_length_is_the_column_length(lead: Client) -> None:
    longest = length_of(User.__table__.c.email)
    address = "a" * (longest - len("@example.org")) + "@example.org"
    assert lead.api("POST", "/api/v1/teams/1/members", {"email": address}).status_code == 201
    longer = "a" + address
    refused = lead.api("POST", "/api/v1/teams/1/members", {"email": longer})
    assert refused.status_code == 422
    page = lead.form("/teams/1/members", {"email": longer, "role": "member"})
    assert page.status_code == 200
    assert f"at most {longest} characters" in page.text


def test_sign_in_name_length_is_the_column_length(app: FastAPI) -> None:
    longest = length_of(User.__table__.c.display_name)
    client = client_for(app)
    client.refresh_csrf()
    fits = client.form(
        "/login/dev",
        {"email": "new@example.org", "name": "n" * longest, "role": "lead"},
        follow_redirects=False,
    )
    assert fits.status_code == 303
    too_long = client_for(app)
    too_long.refresh_csrf()
    refused = too_long.form(
        "/login/dev", {"email": "new2@example.org", "name": "n" * (longest + 1), "role": "lead"}
    )
    assert refused.status_code == 422
    assert f"at most {longest} characters" in refused.text


def test_token_name_length_is_the_column_length(lead: Client) -> None:
    longest = length_of(ApiToken.__table__.c.name)
    assert lead.api("POST", "/api/v1/tokens", {"name": "t" * longest}).status_code == 201
    assert lead.api("POST", "/api/v1/tokens", {"name": "t" * (longest + 1)}).status_code == 422


def test_largest_amounts_fit_the_integer_columns(admin: Client, lead: Client) -> None:
    """With no CPU or memory pool set, the largest amounts anyone may type still fit."""
    pool = {"gpus": QUANTITY_MAX, "cpu_cores": 0, "memory_gb": 0}
    assert admin.api("PUT", "/api/v1/pool", pool).status_code == 200
    request = {
        "name": "huge",
        "gpu_quota": "0",
        "gpu_limit": "1",
        "cpu_quota": str(QUANTITY_MAX),
        "memory_quota": str(QUANTITY_MAX),
    }
    created = lead.api("POST", "/api/v1/requests", request)
    assert created.status_code == 201, created.text
    assert created.json()["requested"]["cpu_quota"] == str(QUANTITY_MAX)
    over = lead.api(
        "POST", "/api/v1/requests", {**request, "name": "huger", "cpu_quota": "1000000.01"}
    )
    assert over.status_code == 422
    biggest = {"gpus": QUANTITY_MAX, "cpu_cores": QUANTITY_MAX, "memory_gb": QUANTITY_MAX}
    assert admin.api("PUT", "/api/v1/pool", biggest).status_code == 200
    beyond = admin.api("PUT", "/api/v1/pool", {**biggest, "cpu_cores": QUANTITY_MAX + 1})
    assert beyond.status_code == 422
    form = admin.form(
        "/admin/pool",
        {"gpus": "1", "cpu_cores": "10000000", "memory_gb": "0"},
        follow_redirects=False,
    )
    assert form.status_code == 422, "the form again, with the reason"
    assert "can be at most 1000000" in form.text


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("0_1", False), ("\u0661", False), (True, False), ("0.5", True), (0.5, True)],
)
def test_only_plain_numbers_are_amounts(lead: Client, value: object, accepted: bool) -> None:
    body = {"name": "odd", "gpu_quota": value, "gpu_limit": "1"}
    answer = lead.api("POST", "/api/v1/requests", body)
    assert answer.status_code == (201 if accepted else 422), answer.text


def test_json_true_is_not_a_priority(lead: Client) -> None:
    body = {"name": "odd", "gpu_quota": "0.1", "gpu_limit": "1", "priority": True}
    assert lead.api("POST", "/api/v1/requests", body).status_code == 422


def test_reasons_and_purposes_are_capped(admin: Client, lead: Client) -> None:
    over = lead.api(
        "POST",
        "/api/v1/requests",
        {"name": "wordy", "gpu_quota": "0", "gpu_limit": "1", "purpose": "p" * (PURPOSE_MAX + 1)},
    )
    assert over.status_code == 422
    created = lead.api(
        "POST", "/api/v1/requests", {"name": "wordy", "gpu_quota": "0", "gpu_limit": "1"}
    )
    request_id = created.json()["id"]
    too_long = admin.api(
        "POST", f"/api/v1/requests/{request_id}/reject", {"reason": "r" * (REASON_MAX + 1)}
    )
    assert too_long.status_code == 422
    page = admin.form(
        f"/admin/requests/{request_id}/reject",
        {"reason": "r" * (REASON_MAX + 1)},
        follow_redirects=False,
    )
    assert page.status_code == 303
    assert f"keep the reason to {REASON_MAX} characters" in admin.get("/admin/requests").text
    fits = admin.api("POST", f"/api/v1/requests/{request_id}/reject", {"reason": "r" * REASON_MAX})
    assert fits.status_code == 200


@pytest.mark.parametrize(
    "month", ["2026-13", "2026-00", "\u0662\u0660\u0662\u0666-11", "26-11", "x"]
)
def test_showback_month_is_checked_in_page_and_api(admin: Client, month: str) -> None:
    assert admin.get("/api/v1/showback", params={"month": month}).status_code == 422
    page = admin.get("/admin/showback.csv", params={"month": month})
    assert page.status_code == 422
    assert "YYYY-MM with a month from 01 to 12" in page.text
    assert admin.get("/api/v1/showback", params={"month": "2026-11"}).status_code == 200
