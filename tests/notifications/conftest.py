"""The web tests' fixtures (a portal app and its signed-in clients), for notification
tests that drive the portal through its pages and API."""

from tests.web.conftest import admin, anonymous, app, lead, other_lead

__all__ = ["admin", "anonymous", "app", "lead", "other_lead"]
