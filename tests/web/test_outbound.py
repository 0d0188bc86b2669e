"""The outbound-address rule: every address a webhook may reach is public, resolved once,
and the connection goes to the address that was checked."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from app.core import outbound
from app.core.models import Delivery
from app.notifications.delivery import Deliverer
from app.runtime import portal_of
from tests.receivers import WebhookReceiver, self_signed
from tests.servers import free_port
from tests.web.conftest import client_for, portal, set_hook

REAL_GETADDRINFO = socket.getaddrinfo
INSIDE = [
    "https://127.0.0.1/x",
    "https://10.1.2.3/x",
    "https://169.254.169.254/latest/meta-data",
    "https://100.64.0.1/",
    "https://224.0.0.1/",
    "https://0.0.0.0/",
    "https://255.255.255.255/",
    "https://[::1]/",
    "https://[fe80::1]/",
    "https://[fc00::1]/",
    "https://[ff02::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::127.0.0.1]/",
    "https://[64:ff9b::a9fe:a9fe]/",
    "https://[64:ff9b::7f00:1]/",
    "https://[64:ff9b:1::1]/",
    "https://[2002:7f00:1::1]/",
    "https://[2002:a9fe:a9fe::1]/",
    "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo, client 127.0.0.1
    # Let by the interpreter's is_global on some patch releases (3.11.7):
    "https://192.0.0.192/",  # a cloud's metadata address in the IETF protocol block
    "https://192.0.0.8/",
    "https://192.88.99.1/",  # the retired 6to4 relay anycast
    "https://[fec0::1]/",  # site-local
    "https://198.18.0.1/",
    "https://192.0.2.1/",
    "https://[2001:db8::1]/",
    "https://[3fff::1]/",
    "https://[100::1]/",
    "https://[5f00::1]/",
    "https://[4000::1]/",  # outside global unicast
]
MALFORMED = [
    ("https://hooks.example.org:80x/", "port"),
    ("https://hooks.example.org:99999/", "port"),
    ("https://hooks.example.org:-1/", "port"),
    ("https://hooks.example.org:0/", "port"),
    ("https://exa mple.org/", "spaces"),
    ("https://exa_mple.org/", "host name"),
    ("https://-bad-.org/", "host name"),
    ("https://hooks.example.org/" + "a" * 3000, "longer than 2048"),
    ("ftp://hooks.example.org/", "full address"),
    ("https://user:pw@hooks.example.org/", "user name"),
]


@pytest.mark.parametrize("url", INSIDE)
def test_every_internal_form_is_refused(url: str) -> None:
    with pytest.raises(outbound.Refused, match="public addresses"):
        outbound.check(url, https_only=True, allow_private=False)


@pytest.mark.parametrize(("url", "words"), MALFORMED)
def test_malformed_addresses_say_what_to_change(url: str, words: str) -> None:
    with pytest.raises(outbound.Refused, match=words):
        outbound.check(url, https_only=True, allow_private=True)


def test_the_table_is_the_projects_own_not_the_interpreters() -> None:
    """Every block of the table is refused whatever ``is_global`` says of it."""
    for block, what in outbound.SPECIAL_PURPOSE:
        for address in (block.network_address, block.broadcast_address):
            problem = outbound.why_not_public(address)
            assert problem is not None, address
            if address.version == 4:
                assert problem == what, address


def test_public_addresses_pass_and_embedded_public_ipv4_too() -> None:
    for url in ("https://8.8.8.8/x", "https://[2606:4700::1]/", "https://[64:ff9b::808:808]/"):
        assert outbound.check(url, https_only=True, allow_private=False).addresses


def test_a_name_is_refused_when_any_of_its_addresses_is_internal() -> None:
    def resolver(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", port)),
        ]

    with pytest.raises(outbound.Refused, match=r"10\.0\.0\.5"):
        outbound.check(
            "https://mixed.example/", https_only=True, allow_private=False, resolver=resolver
        )


def test_the_pinned_request_keeps_the_name_for_host_and_tls() -> None:
    target = outbound.Target(
        url="https://hooks.example.org:8443/services/T/B/X?a=1",
        scheme="https",
        host="hooks.example.org",
        port=8443,
        addresses=(ipaddress.ip_address("2606:4700::1"),),
    )
    url, headers, extensions = target.pinned()
    assert url == "https://[2606:4700::1]:8443/services/T/B/X?a=1"
    assert headers == {"Host": "hooks.example.org:8443"}
    assert extensions == {"sni_hostname": "hooks.example.org"}


class Flipping:
    """A resolver that answers ``first`` once and ``then`` ever after (DNS rebinding)."""

    def __init__(self, first: str, then: str) -> None:
        self.answers = [first, then]
        self.calls = 0

    def __call__(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        try:
            ipaddress.ip_address(host)
            return list(REAL_GETADDRINFO(host, port, *args, **kwargs))  # a literal: no DNS
        except ValueError:
            pass
        address = self.answers[min(self.calls, 1)]
        self.calls += 1
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


@pytest.fixture
def strict_app(db_url: str) -> Iterator[FastAPI]:
    """Development sign-in, but webhooks held to the production rule."""
    yield from portal(
        db_url,
        webhook_private_hosts=False,
        delivery_retry_base_seconds=0.0,
        webhook_timeout_seconds=2.0,
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://100.64.0.1/",
        "https://[64:ff9b::7f00:1]/",
        "https://[2002:7f00:1::1]/",
        "https://224.0.0.1/",
    ],
)
def test_saving_an_internal_address_is_a_422_that_names_it(strict_app: FastAPI, url: str) -> None:
    lead = client_for(strict_app, "lead-nlp@example.org")
    page = lead.form("/teams/1/webhooks", {"kind": "slack", "url": url})
    assert page.status_code == 422
    assert "the portal calls only services on public addresses" in page.text


@pytest.mark.parametrize(
    "url",
    ["https://h.example.org:80x/", "https://h.example.org:99999/", "https://h.example.org:-1/"],
)
def test_a_bad_port_is_a_422_not_a_500(strict_app: FastAPI, url: str) -> None:
    lead = client_for(strict_app, "lead-nlp@example.org")
    page = lead.form("/teams/1/webhooks", {"kind": "json", "url": url})
    assert page.status_code == 422
    assert "the port must be a number from 1 to 65535" in page.text


def test_a_long_address_is_refused_not_stored(strict_app: FastAPI) -> None:
    lead = client_for(strict_app, "lead-nlp@example.org")
    page = lead.form(
        "/teams/1/webhooks", {"kind": "slack", "url": "https://8.8.8.8/" + "x" * 100_000}
    )
    assert page.status_code in (413, 422)
    assert "2048" in page.text or "at most" in page.text


def test_a_name_that_rebinds_to_loopback_is_never_reached(
    strict_app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The save-time check and the send-time check each resolve once; the connection goes
    to the address the send-time check passed, never to a later answer of the name."""
    lead = client_for(strict_app, "lead-nlp@example.org")
    deliverer: Deliverer = portal_of(strict_app).deliverer
    resolver = Flipping("8.8.8.8", "127.0.0.1")
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    set_hook(lead, "/teams/1/webhooks", "slack", "http://rebind.example:8080/services/T/B/X")
    connected: list[Any] = []

    def no_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        connected.append(address)
        raise OSError("no route (the test's network stops here)")

    monkeypatch.setattr(socket, "create_connection", no_connection)
    lead.api("POST", "/api/v1/teams/1/members", {"email": "c@example.org", "role": "member"})
    resolver.answers = ["8.8.8.8", "127.0.0.1"]
    resolver.calls = 0
    deliverer.resolver = resolver
    deliverer.run_once()
    assert resolver.calls == 1, "one lookup per attempt"
    assert connected, "the checked address was tried"
    assert {a[0] for a in connected} == {"8.8.8.8"}
    # The next attempt's single lookup answers 127.0.0.1: refused, never connected.
    with portal_of(strict_app).session_factory() as session:
        failed = session.scalars(select(Delivery).where(Delivery.channel == "slack")).all()
    assert failed
    assert all(d.status == "pending" for d in failed)
    connected.clear()
    deliverer.run_once()
    assert connected == []
    with portal_of(strict_app).session_factory() as session:
        errors = {
            d.last_error
            for d in session.scalars(select(Delivery).where(Delivery.channel == "slack"))
        }
    assert any("a loopback address (127.0.0.1)" in e for e in errors), errors


def test_the_connection_goes_to_the_checked_address_with_the_name_for_tls(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two receivers on one port: 127.0.0.2 (what the check saw) and 127.0.0.1 (what the
    name answers next). Over TLS with a certificate for the name only, the post lands on
    the checked one, so the address was pinned and the name was used for TLS."""
    cert, key = self_signed(tmp_path, names=("hooks.test",))
    port = free_port()
    checked = WebhookReceiver(address="127.0.0.2", port=port, tls=(cert, key))
    rebound = WebhookReceiver(address="127.0.0.1", port=port, tls=(cert, key))
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    try:
        for application in portal(
            db_url, webhook_private_hosts=True, delivery_retry_base_seconds=0.0
        ):
            lead = client_for(application, "lead-nlp@example.org")
            monkeypatch.setattr(socket, "getaddrinfo", Flipping("127.0.0.2", "127.0.0.2"))
            set_hook(lead, "/teams/1/webhooks", "json", f"https://hooks.test:{port}/in")
            deliverer: Deliverer = portal_of(application).deliverer
            deliverer.resolver = Flipping("127.0.0.2", "127.0.0.1")
            lead.api(
                "POST", "/api/v1/teams/1/members", {"email": "c@example.org", "role": "member"}
            )
            deliverer.run_once()
            with portal_of(application).session_factory() as session:
                rows = session.scalars(select(Delivery).where(Delivery.channel == "json")).all()
            assert [(d.status, d.last_error) for d in rows] == [("sent", "")]
    finally:
        checked.close()
        rebound.close()
    assert [p.path for p in checked.posts] == ["/in"]
    assert checked.posts[0].headers["Host"] == f"hooks.test:{port}"
    assert rebound.posts == []
