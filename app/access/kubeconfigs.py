"""Personal kubeconfigs as files: one cluster, one user, one context, named after the team
and the person, with a header that says whose file it is and when it stops working."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime
from typing import Any

import yaml

from app.access.credentials import Person


def names(team: str, person: Person) -> tuple[str, str]:
    """(cluster, user-and-context) names: ``audio`` and ``audio/alice@example.com``."""
    return team, f"{team}/{person.email}"


def header(team: str, person: Person, expires_at: datetime | None, *, note: str = "") -> str:
    lines = [
        f"# Personal kubeconfig of {person.email} for team {team} "
        f"(role inside the vCluster: {person.cluster_role}).",
    ]
    if expires_at is not None:
        lines.append(
            f"# Expires {expires_at.strftime('%Y-%m-%dT%H:%M:%SZ')}; "
            "it stops working earlier if you leave the team or it is revoked."
        )
    lines.append("# Do not share it: download your own from the portal's team page.")
    if note:
        lines.append(f"# {note}")
    return "\n".join(lines) + "\n"


def token_kubeconfig(
    *,
    team: str,
    person: Person,
    server: str,
    ca_data: str | None,
    token: str,
    expires_at: datetime,
    note: str = "",
) -> str:
    config = _config(team, person, server, ca_data, {"token": token})
    return header(team, person, expires_at, note=note) + config


def _config(
    team: str, person: Person, server: str, ca_data: str | None, user: dict[str, Any]
) -> str:
    cluster_name, user_name = names(team, person)
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": user_name, "context": {"cluster": cluster_name, "user": user_name}}],
        "current-context": user_name,
    }
    return yaml.safe_dump(config, sort_keys=False)


def oidc_kubeconfig(
    *,
    team: str,
    person: Person,
    server: str,
    ca_data: str | None,
    issuer: str,
    client_id: str,
) -> str:
    """Signs in with the kubelogin exec plugin (``kubectl oidc-login``): the identity
    provider's token is the credential, refreshed by the plugin, never in the file."""
    exec_config = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "kubectl",
        "args": [
            "oidc-login",
            "get-token",
            f"--oidc-issuer-url={issuer}",
            f"--oidc-client-id={client_id}",
            "--oidc-extra-scope=email",
            "--oidc-extra-scope=groups",
        ],
        "interactiveMode": "IfAvailable",
        "provideClusterInfo": False,
        "installHint": "Install kubelogin: https://github.com/int128/kubelogin "
        "(kubectl krew install oidc-login).",
    }
    config = _config(team, person, server, ca_data, {"exec": exec_config})
    return header(team, person, None, note="Signs in through your identity provider.") + config


def token_id(token: str) -> str:
    """The token's ``jti`` claim when it has one (Kubernetes 1.29+ puts it in the API
    server's audit log as the credential id), else a fingerprint that cannot be turned
    back into the token."""
    parts = token.split(".")
    if len(parts) == 3:
        try:
            padded = parts[1] + "=" * (-len(parts[1]) % 4)
            claims = json.loads(base64.urlsafe_b64decode(padded))
        except (binascii.Error, ValueError):
            claims = {}
        if isinstance(claims, dict) and isinstance(claims.get("jti"), str):
            return str(claims["jti"])[:64]
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:32]
