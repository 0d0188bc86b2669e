"""Pure validation rules for team names and quotas: no database, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from app.core.errors import InvalidInput
from app.core.models import Org
from app.core.quantities import format_hundredths, parse_hundredths

# `vcluster-<name>` must stay a valid namespace (63), and the Helm release and the
# StatefulSet that vCluster names after the team must stay under 53 and 52 characters
# with the suffixes vCluster adds: 40 leaves room for all of them.
TEAM_NAME_MAX = 40
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RESERVED_NAMES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
PRIORITY_MIN, PRIORITY_MAX = 1, 1000
PURPOSE_MAX = 2000
REASON_MAX = 2000
_WHOLE = re.compile(r"[0-9]{1,9}", re.ASCII)


@dataclass(frozen=True)
class QuotaValues:
    """Quota values in storage units (hundredths of a GPU, millicores, megabytes)."""

    gpu_quota_centi: int
    gpu_limit_centi: int
    weight_centi: int = 100
    priority: int = 100
    cpu_quota_millicores: int | None = None
    memory_quota_mb: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def display(self) -> dict[str, str]:
        """Field name -> value as a person types it."""
        return {
            "gpu_quota": format_hundredths(self.gpu_quota_centi),
            "gpu_limit": format_hundredths(self.gpu_limit_centi),
            "over_quota_weight": format_hundredths(self.weight_centi),
            "priority": str(self.priority),
            "cpu_quota": ""
            if self.cpu_quota_millicores is None
            else format_hundredths(self.cpu_quota_millicores // 10),
            "memory_quota": ""
            if self.memory_quota_mb is None
            else format_hundredths(self.memory_quota_mb // 10),
        }


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


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if isinstance(value, bool):  # JSON true is not 1
        return str(value).lower()
    return "" if value is None else str(value).strip()


def parse_quota_fields(data: Mapping[str, Any]) -> QuotaValues:
    """Read quota fields as typed in a form (at the edge: pages parse once, then hand the
    values to a service, which checks them against the pool)."""
    return parse_quota(data, pool=None)


def quota_problems(values: QuotaValues, pool: Org) -> dict[str, str]:
    """What is wrong with parsed values against the pool: field -> what to change."""
    errors: dict[str, str] = {}
    limit, quota = values.gpu_limit_centi, values.gpu_quota_centi
    if quota > limit:
        errors["gpu_limit"] = _below_guarantee(quota, limit)
    if limit > pool.gpus_centi:
        errors["gpu_limit"] = _above_pool(limit, pool)
    cpu, memory = values.cpu_quota_millicores, values.memory_quota_mb
    if cpu is not None and pool.cpu_millicores and cpu > pool.cpu_millicores:
        errors["cpu_quota"] = _cpu_above_pool(pool)
    if memory is not None and pool.memory_mb and memory > pool.memory_mb:
        errors["memory_quota"] = _memory_above_pool(pool)
    return errors


def _below_guarantee(quota: int, limit: int) -> str:
    return (
        f"the limit ({format_hundredths(limit)} GPU) cannot be below the guarantee "
        f"({format_hundredths(quota)} GPU): raise the limit or lower the guarantee"
    )


def _above_pool(limit: int, pool: Org) -> str:
    pool_text = format_hundredths(pool.gpus_centi)
    return (
        f"the limit ({format_hundredths(limit)} GPU) cannot exceed the pool of "
        f"{pool_text} GPU: enter {pool_text} or less"
    )


def _cpu_above_pool(pool: Org) -> str:
    return (
        f"the CPU guarantee cannot exceed the pool's "
        f"{format_hundredths(pool.cpu_millicores // 10)} cores"
    )


def _memory_above_pool(pool: Org) -> str:
    return (
        f"the memory guarantee cannot exceed the pool's "
        f"{format_hundredths(pool.memory_mb // 10)} GB"
    )


def parse_quota(data: Mapping[str, Any], *, pool: Org | None) -> QuotaValues:
    """Read quota fields as typed in a form or JSON body; raise with every problem found
    (against the pool too, unless ``pool`` is None)."""
    errors: dict[str, str] = {}

    def hundredths(key: str, what: str, default: str | None = None) -> int | None:
        raw = _text(data, key) or (default or "")
        try:
            return parse_hundredths(raw, what=what)
        except ValueError as exc:
            errors[key] = str(exc)
            return None

    quota = hundredths("gpu_quota", "the GPU guarantee")
    limit = hundredths("gpu_limit", "the GPU limit")
    weight = hundredths("over_quota_weight", "the over-quota weight", default="1")
    if quota is not None and limit is not None and quota > limit:
        errors["gpu_limit"] = _below_guarantee(quota, limit)
    if pool is not None and limit is not None and limit > pool.gpus_centi:
        errors["gpu_limit"] = _above_pool(limit, pool)

    priority = 100
    raw_priority = _text(data, "priority")
    if raw_priority:
        try:
            if not _WHOLE.fullmatch(raw_priority):
                raise ValueError
            priority = int(raw_priority)
            if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
                raise ValueError
        except ValueError:
            errors["priority"] = (
                f"priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX} "
                "(KAI's default is 100)"
            )

    cpu_millicores: int | None = None
    if _text(data, "cpu_quota"):
        cpu = hundredths("cpu_quota", "the CPU guarantee (cores)")
        if cpu is not None:
            cpu_millicores = cpu * 10
            if pool is not None and pool.cpu_millicores and cpu_millicores > pool.cpu_millicores:
                errors["cpu_quota"] = _cpu_above_pool(pool)
    memory_mb: int | None = None
    if _text(data, "memory_quota"):
        memory = hundredths("memory_quota", "the memory guarantee (GB)")
        if memory is not None:
            memory_mb = memory * 10
            if pool is not None and pool.memory_mb and memory_mb > pool.memory_mb:
                errors["memory_quota"] = _memory_above_pool(pool)
    if errors or quota is None or limit is None or weight is None:
        raise InvalidInput(errors)
    return QuotaValues(
        gpu_quota_centi=quota,
        gpu_limit_centi=limit,
        weight_centi=weight,
        priority=priority,
        cpu_quota_millicores=cpu_millicores,
        memory_quota_mb=memory_mb,
    )


def parse_purpose(data: Mapping[str, Any]) -> str:
    purpose = _text(data, "purpose")
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
