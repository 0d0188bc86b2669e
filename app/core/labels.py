"""What people call the quota's fields: the forms' labels, and the words of every message
that names a field (an approval with changes says "GPU limit 1 → 0.75", never
``gpu_limit``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# field -> (label, unit after a value; "" where the label says it)
QUOTA_FIELDS: dict[str, tuple[str, str]] = {
    "gpu_quota": ("GPU guarantee", ""),
    "gpu_limit": ("GPU limit", ""),
    "over_quota_weight": ("Over-quota weight", ""),
    "priority": ("Queue priority", ""),
    "cpu_quota": ("CPU guarantee", "cores"),
    "memory_quota": ("Memory guarantee", "GB"),
}


# Other fields a decision may change.
OTHER_FIELDS = {"template": "Cluster template"}


def label(field: str) -> str:
    """The form's label of ``field`` (the field's own name if it has none)."""
    if field.startswith("param-"):  # a template's parameter (the message names it)
        return "Template parameter"
    return QUOTA_FIELDS.get(field, (OTHER_FIELDS.get(field, field), ""))[0]


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
