"""Schemathesis over the OpenAPI document: every operation, signed in as an admin and as a
lead, on both databases. No answer may be a server error or disagree with the document."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.result import Ok

from app.auth import repository as users
from app.auth import tokens
from app.core.db import unit_of_work
from app.main import create_app
from app.runtime import portal_of
from app.teams import repository as repo
from app.teams import service
from app.teams.rules import parse_quota_fields
from app.teams.seed import seed_example
from tests.conftest import settings_for

# Schema-valid requests may still break a rule the schema cannot state (a limit above the
# pool, a guarantee others already hold): those are 422 or 409 answers by design, not
# failures. Every other check runs, server errors and response conformance included.
BUSINESS_RULES = [positive_data_acceptance]
# Examples per operation and database; each example is sent as a lead and as an admin.
EXAMPLES = 15


@pytest.fixture
def api_app(db_url: str) -> Iterator[FastAPI]:
    application = create_app(settings_for(db_url))
    with TestClient(application):
        with unit_of_work(portal_of(application).session_factory) as session:
            seed_example(session)
            bearer: dict[str, str] = {}
            for role, email in (("admin", "admin@example.org"), ("lead", "lead-nlp@example.org")):
                user = users.get_user_by_email(session, email)
                assert user is not None
                bearer[role] = tokens.create(
                    session, user=user, name="schemathesis", days=1, max_days=90
                ).raw
        for _ in range(10):  # simulated steps take no time: a few passes make nlp ready
            portal_of(application).reconciler.run_once()
        # One open quota change, so the decision routes meet a real request too.
        with unit_of_work(portal_of(application).session_factory) as session:
            lead = users.get_user_by_email(session, "lead-nlp@example.org")
            assert lead is not None
            service.submit_quota_change(
                session,
                actor=lead,
                team=repo.get_team(session, 1),
                values=parse_quota_fields({"gpu_quota": "0.3", "gpu_limit": "1"}),
            )
        application.state.bearer = bearer
        yield application


def test_api_answers_within_its_document(api_app: FastAPI) -> None:
    """Each operation gets its own Hypothesis run; every failure is collected, then shown."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", api_app)
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the document has an invalid operation: {result}"
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=True,
        )
        def check(case: Any) -> None:
            for role in ("lead", "admin"):
                headers = {"Authorization": f"Bearer {api_app.state.bearer[role]}"}
                case.call_and_validate(headers=headers, excluded_checks=BUSINESS_RULES)

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # every operation's failure is kept
            failures.append(f"{operation.label}: {exc}")
    assert operations >= 26
    assert failures == [], "\n\n".join(failures)
