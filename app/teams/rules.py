"""Pure validation rules for team names and quotas: no database, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.core import quota
from app.core.errors import InvalidInput
from app.core.models import Org
from app.core.quota import GPU, Quota
from app.core.quota import PRIORITY_MAX as PRIORITY_MAX
from app.core.quota import PRIORITY_MIN as PRIORITY_MIN

# `vcluster-<name>` must stay a valid namespace (63), and the Helm release and the
# StatefulSet that vCluster names after the team must stay under 53 and 52 characters
# with the suffixes vCluster adds: 40 leaves room for all of them.
TEAM_NAME_MAX = 40
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RESERVED_NAMES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
PURPOSE_MAX = 2000
REASON_MAX = 2000


def team_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a team name, or None."""
    if not name:
        return "enter a team name, e.g. nlp"
    if len(name) > TEAM_NAME_MAX:
        return (
            f"use at most {TEAM_NAME_MAX} characters (it becomes the namespace "
            f"vcluster-{name[:8]}… and the vCluster's Helm release)"
        )
    if name != name.lower():
        return f"use lower-case letters only: {name.lower()!r}"
    if not _DNS_LABEL.match(name):
        return (
            "use lower-case letters, digits and '-', starting and ending with a letter "
            "or digit (a DNS-1123 label), e.g. nlp or vision-2"
        )
    if name in RESERVED_NAMES or name.startswith("kube-"):
        return f"{name!r} is reserved by Kubernetes; choose another name"
    return None


def parse_quota_fields(data: Mapping[str, Any]) -> Quota:
    """Read quota fields as typed in a form (at the edge: pages parse once, then hand the
    values to a service, which checks them against the pool)."""
    return quota.parse(data, capacity=None)


POOL_FIELD = re.compile(r"pools\.([a-z0-9][-a-z0-9]*)\.([a-z_]+)")


def parse_pool_fields(data: Mapping[str, Any]) -> dict[str, Quota] | None:
    """The quota in other pools as a form types it (``pools.<pool>.<field>``: the GPU
    guarantee, limit and weight), by pool name; a pool left empty is not asked for. None
    when the form has no pool fields at all (it does not offer other pools)."""
    typed: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        found = POOL_FIELD.fullmatch(key)
        if found:
            typed.setdefault(found.group(1), {})[found.group(2)] = value
    if not typed:
        return None
    pools: dict[str, Quota] = {}
    errors: dict[str, str] = {}
    for name, fields in typed.items():
        if not any(
            str(fields.get(f) or "").strip() for f in (GPU.guarantee_field, GPU.limit_field)
        ):
            continue
        try:
            pools[name] = quota.parse(fields, capacity=None)
        except InvalidInput as exc:
            errors.update(
                {f"pools.{name}.{k}": f"in pool {name}: {v}" for k, v in exc.errors.items()}
            )
    if errors:
        raise InvalidInput(errors)
    return pools


def parse_quota(data: Mapping[str, Any], *, pool: Org | None) -> Quota:
    """Read quota fields as typed in a form or JSON body; raise with every problem found
    (against the pool too, unless ``pool`` is None)."""
    return quota.parse(data, capacity=None if pool is None else pool.capacity)


def quota_problems(values: Quota, pool: Org) -> dict[str, str]:
    """What is wrong with parsed values against the pool: field -> what to change."""
    return values.problems(pool.capacity)


def parse_purpose(data: Mapping[str, Any]) -> str:
    purpose = quota.typed(data, "purpose")
    if len(purpose) > PURPOSE_MAX:
        raise InvalidInput({"purpose": f"keep the purpose under {PURPOSE_MAX} characters"})
    return purpose


def parse_reason(raw: str, *, required: bool) -> str:
    """An admin's reason for a decision: kept in the audit trail, shown to the team."""
    reason = raw.strip()
    if required and not reason:
        raise InvalidInput({"reason": "say why the request is rejected, so the team can fix it"})
    if len(reason) > REASON_MAX:
        raise InvalidInput(
            {"reason": f"keep the reason to {REASON_MAX} characters (it has {len(reason)})"}
        )
    return reason
