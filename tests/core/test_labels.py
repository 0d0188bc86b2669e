"""No internal field name reaches a page: every field a refusal can name has a label, and
a refusal shown on a page names fields by their labels."""

from __future__ import annotations

import re
from pathlib import Path

from app.core import labels
from app.core.errors import Conflict, InvalidInput

APP = Path(__file__).resolve().parents[2] / "app"
# The keys of every refusal of a field: ``InvalidInput({"key": ...})`` and
# ``errors["key"] = ...`` / ``problems[f"pools.{name}"] = ...`` (an f-string's parts as x).
KEYED = re.compile(r'InvalidInput\(\s*\{\s*f?"([^"]+)"|(?:errors|problems)\[f?"([^"]+)"\]\s*=')


def refused_fields() -> set[str]:
    found = set()
    for source in APP.rglob("*.py"):
        for match in KEYED.finditer(source.read_text()):
            key = match.group(1) or match.group(2)
            if source.name == "rules.py" and source.parent.name == "catalog" and key[0] == "{":
                continue  # a computed path inside a template's spec (``{where}.{number}``)
            found.add(re.sub(r"\{[^}]*\}", "x", key))
    return found


def test_every_field_a_refusal_names_has_a_label() -> None:
    fields = refused_fields()
    assert {"gpu_quota", "sleep_after_hours", "awake_until", "name"} <= fields, fields
    # A template's spec names the YAML path the admin wrote (their own words), as written.
    named = {f for f in fields if f.split(".")[0] not in labels.SPEC_PATHS}
    unlabelled = sorted(f for f in named if labels.label(f) == f)
    assert unlabelled == [], f"fields a page would show by their internal names: {unlabelled}"


def test_a_refusal_on_a_page_says_labels_not_names() -> None:
    said = labels.said(
        InvalidInput({"gpu_quota": "Too much.", "sleep_after_hours": "Choose 1 to 24."})
    )
    assert said == "GPU guarantee: Too much.; Sleep after (idle hours): Choose 1 to 24."
    assert labels.said(InvalidInput({"pools.l40s.gpu_limit": "in pool l40s: too low"})) == (
        "In pool l40s: GPU limit: in pool l40s: too low"
    )
    assert labels.said(Conflict("Already asleep.")) == "Already asleep."
