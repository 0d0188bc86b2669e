"""The provisioning tests' simulated cluster and the reconciler over it."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.adapters.simulated import SimulatedBackend
from app.provisioning.reconciler import Reconciler
from tests.conftest import settings_for


@pytest.fixture
def backend() -> SimulatedBackend:
    return SimulatedBackend(step_seconds=0)


@pytest.fixture
def reconciler(
    session_factory: sessionmaker[Session], backend: SimulatedBackend, db_url: str
) -> Reconciler:
    return Reconciler(session_factory, backend, settings_for(db_url), owner="worker-a")
