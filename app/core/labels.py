"""What people call the quota's fields: the forms' labels, and the words of every message
that names a field (an approval with changes says "GPU limit 1 → 0.75", never
``gpu_limit``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.core import quota
from app.core.errors import DomainError, InvalidInput

# field -> (label, unit after a value; "" where the label says it)
QUOTA_FIELDS: dict[str, tuple[str, str]] = quota.field_labels()


@dataclass(frozen=True)
class FormField:
    """A quota field as a form and a review card show it."""

    name: str
    label: str
    unit: str  # after a value on a card: "GPU", "cores"; "" for a weight or a priority
    hint: str
    mode: str  # the input's inputmode: "decimal" or "numeric"
    required: bool
    main: bool  # in the form's first rows (else under "more")
    optional: bool  # an optional resource's (shown on a card only when asked)


_HINTS = {
    "guarantee": "Always yours, even when everyone is busy. Fractions to two decimals.",
    "limit": "The most you may use when others are idle.",
    quota.WEIGHT_FIELD: "Your share of idle GPUs relative to other teams (default 1).",
    quota.PRIORITY_FIELD: (
        f"KAI queue priority, {quota.PRIORITY_MIN}\u2013{quota.PRIORITY_MAX} "
        f"(default {quota.PRIORITY_DEFAULT})."
    ),
}


def form_fields() -> list[FormField]:
    """The quota's fields in the forms' order: each required resource's guarantee and
    limit first, then the weight, the priority and the optional resources."""
    main: list[FormField] = []
    more: list[FormField] = []
    for res in quota.RESOURCES:
        into, need = (main, True) if res.required else (more, False)
        into.append(_resource_field(res.guarantee_field, res.unit, "guarantee", need))
        if res.limited:
            into.append(_resource_field(res.limit_field, res.unit, "limit", need))
    extras = [
        FormField(name, form_label(name), "", _HINTS[name], mode, False, False, False)
        for name, mode in ((quota.WEIGHT_FIELD, "decimal"), (quota.PRIORITY_FIELD, "numeric"))
    ]
    return main + extras + more


def _resource_field(name: str, unit: str, kind: str, required: bool) -> FormField:
    hint = _HINTS[kind] if required else ""
    return FormField(
        name, form_label(name), unit, hint, "decimal", required, required, not required
    )


# Every other field a form or a decision names, as its form labels it.
OTHER_FIELDS = {
    "template": "Cluster template",
    "name": "Name",
    "purpose": "Purpose",
    "reason": "Reason",
    "email": "Email",
    "role": "Role",
    "ttl": "Valid for",
    "hours": "Keep awake for",
    "awake_until": "Keep awake until",
    "sleep_after_hours": "Sleep after (idle hours)",
    "sleep_max_hours": "Longest a team may choose (hours)",
    "sleep_quiet_hours": "Quiet hours",
    "sleep_time_zone": "Time zone",
    "gpus": "GPUs",
    "gpu_type": "GPU type",
    "label_value": "Node label value",
    "price": "Price per GPU-hour",
    "days": "Days",
    "month": "Month",
    "range": "Period",
    "pool": "Node pool",
    "limit": "Limit added",
    "starts_at": "From",
    "ends_at": "Until",
    "gpu_hours": "GPU-hours",
    "at_limit": "When it is spent",
    "url": "URL",
    "kind": "Kind",
    "events": "Events",
    "parameters": "Template parameters",
    "default_quota": "Default quota",
    "kai_queue_label": "Queue label",
    "shown_default": "Shown by default",
    "sub": "Your identity provider's subject",
    "page": "Page number",
    "sort": "Sort by",
    "status": "Status",
    "q": "Search",
    "before": "Older than",
    "again": "The event to show again",
}
# A template's spec: its errors name the YAML path the admin wrote (``vcluster_values.x``),
# which is the word on the admin's screen; shown as written.
SPEC_PATHS = ("spec", "vcluster_values", "manifests", "charts", "version")


def label(field: str) -> str:
    """The form's label of ``field`` (the field's own name if it has none)."""
    if field.startswith(("param-", "parameters.")):  # a template's (the message names it)
        return "Template parameter"
    if field.startswith("pool "):  # the quota in another pool ("pool l40s")
        return f"In {field}:"
    head, _, rest = field.partition(".")
    if head == "pools" and rest:  # "pools.l40s.gpu_quota"
        pool, _, inner = rest.partition(".")
        return f"In pool {pool}" + (f": {label(inner)}" if inner else "")
    if head == "default_quota" and rest:
        return f"Default quota: {label(rest)}"
    if field.endswith("_id"):  # an id in the address ("team_id")
        return f"The {field.removesuffix('_id').replace('_', ' ')}'s number in the address"
    return QUOTA_FIELDS.get(field, (OTHER_FIELDS.get(field, field), ""))[0]


def said(exc: DomainError) -> str:
    """A refusal as a person reads it on a page: an invalid form's messages, each after its
    field's label, never the field's name."""
    if isinstance(exc, InvalidInput):
        return "; ".join(f"{label(k)}: {v}" for k, v in exc.errors.items())
    return exc.message


def form_label(field: str) -> str:
    """The label a form shows above the field's input: "CPU guarantee (cores)"."""
    name, unit = QUOTA_FIELDS.get(field, (field, ""))
    return f"{name} ({unit})" if unit else name


def amount(field: str, value: str) -> str:
    """A value as a person reads it: "4 cores", "none" for an empty optional one."""
    if value == "":
        return "none"
    unit = QUOTA_FIELDS.get(field, ("", ""))[1]
    return f"{value} {unit}" if unit else value


def changes(changed: Mapping[str, Sequence[str]]) -> str:
    """``{"gpu_limit": ["1", "0.75"]}`` -> "GPU limit 1 → 0.75"."""
    parts = []
    for field, (before, after) in changed.items():
        parts.append(f"{label(field)} {before or 'none'} → {amount(field, after)}")
    return ", ".join(parts)
