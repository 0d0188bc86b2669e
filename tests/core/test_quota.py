"""The quota's declaration: one place that says which resources a team is given, read by
every parse, check, label and message."""

from __future__ import annotations

import pytest

from app.core import labels, quota
from app.core.errors import InvalidInput
from app.core.models import Org, Pool, Team
from app.core.quota import CPU, GPU, MEMORY, Line, Quota, Resource

POOL = {"gpu": 100, "cpu": 40_000, "memory": 160_000}

DISK = Resource(
    key="ephemeral-storage",
    name="Disk",
    unit="GB",
    scale=10,
    kai_scale=1.0,
    required=False,
    limited=True,
    pool_field="disk_gb",
    pool_label="disk (GB)",
)


def test_amounts_convert_between_what_people_type_storage_and_kai() -> None:
    assert (GPU.parse("0.33", "x"), GPU.text(33), GPU.kai(33)) == (33, "0.33", 0.33)
    assert (CPU.parse("2.5", "x"), CPU.text(2500), CPU.kai(2500)) == (2500, "2.5", 2500)
    assert (MEMORY.shown(16_000), MEMORY.shown(None)) == ("16 GB", "none")
    assert GPU.kai(None) == 0.0


def test_kai_reads_each_amount_as_the_decimal_it_is() -> None:
    """0.57 GPU reaches the Queue as 0.57, not 57 x 0.01 = 0.5700000000000001 (a grant of
    0.5 on 0.33 wrote 0.8300000000000001 to a real API server's Queue)."""
    assert [c for c in range(100_001) if repr(GPU.kai(c)) != repr(c / 100)] == []
    assert GPU.kai(83) == 0.83


def test_a_form_is_parsed_once_into_a_line_per_resource() -> None:
    parsed = quota.parse(
        {"gpu_quota": "0.5", "gpu_limit": "1", "cpu_quota": "4", "priority": "7"},
        capacity=POOL,
    )
    assert parsed == Quota((Line(50, 100), Line(4000, None), Line(None, None)), 7)
    assert (parsed["cpu"].guarantee, parsed.gpu.usable) == (4000, 100)
    assert parsed.display() == {
        "gpu_quota": "0.5",
        "gpu_limit": "1",
        "cpu_quota": "4",
        "memory_quota": "",
        "over_quota_weight": "1",
        "priority": "7",
    }
    assert quota.parse(parsed.display(), capacity=POOL) == parsed


@pytest.mark.parametrize(
    ("typed", "field", "said"),
    [
        ({"gpu_limit": "2"}, "gpu_limit", "the limit (2 GPU) cannot exceed the pool of 1 GPU: "),
        ({"cpu_quota": "41"}, "cpu_quota", "the guarantee (41 cores) cannot exceed the pool of"),
        ({"memory_quota": "161"}, "memory_quota", "the guarantee (161 GB) cannot exceed the pool"),
        ({"gpu_quota": "0.9", "gpu_limit": "0.5"}, "gpu_limit", "cannot be below the guarantee"),
    ],
)
def test_one_fit_rule_in_one_wording_for_every_resource(
    typed: dict[str, str], field: str, said: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        quota.parse({"gpu_quota": "0.5", "gpu_limit": "1", **typed}, capacity=POOL)
    assert said in caught.value.errors[field]
    # The same rule, asked of a value (the approval's check of what a request holds).
    value = Quota.of_gpu(GPU.parse(typed.get("gpu_quota", "0.5"), "x"), 100)
    lines = {"gpu": Line(value.gpu.guarantee, GPU.parse(typed.get("gpu_limit", "1"), "x"))}
    for res in (CPU, MEMORY):
        raw = typed.get(res.guarantee_field)
        lines[res.key] = Line(None if raw is None else res.parse(raw, "x"))
    value = Quota(tuple(lines[res.key] for res in quota.RESOURCES))
    assert said in value.problems(POOL)[field]


def test_an_optional_resource_is_checked_only_where_the_pool_sets_it() -> None:
    parsed = quota.parse({"gpu_quota": "0", "gpu_limit": "0", "cpu_quota": "99"}, capacity=None)
    assert parsed.problems({"gpu": 100, "cpu": 0, "memory": 0}) == {}
    assert "cpu_quota" in parsed.problems(POOL)


def test_errors_name_the_field_by_its_label() -> None:
    with pytest.raises(InvalidInput) as caught:
        quota.parse({"gpu_quota": "", "gpu_limit": "x", "memory_quota": "-1"}, capacity=None)
    errors = caught.value.errors
    assert errors["gpu_quota"] == "enter the GPU guarantee, e.g. 0.5"
    assert "the GPU limit must be a number" in errors["gpu_limit"]
    assert "the memory guarantee (GB) cannot be negative" in errors["memory_quota"]


def test_a_quota_is_stored_as_lines_keyed_by_pool_and_resource() -> None:
    org = Org.with_pool("ml-org", {"gpu": 100})
    other = Pool(name="h100")
    org.pools.append(other)
    team = Team(name="nlp")
    value = Quota((Line(33, 100, 150), Line(None, None, 150), Line(8000, None, 150)), 40)
    team.set_quota(org.default_pool, value)
    team.set_quota(other, Quota.of_gpu(200, 400, priority=40))  # one priority a team
    stored = {(line.pool.name, line.resource): line.guarantee for line in team.quota_lines}
    assert stored == {("default", "gpu"): 33, ("default", "memory"): 8000, ("h100", "gpu"): 200}
    assert team.quota == team.quota_in(org.default_pool) == value
    assert team.quota_in(other).gpu == Line(200, 400)
    # A change updates the lines in place; a resource no longer asked loses its line.
    team.set_quota(org.default_pool, Quota.of_gpu(50, 100))
    assert len(team.quota_lines) == 2
    assert team.quota == Quota.of_gpu(50, 100)


def test_changes_and_messages_come_from_the_declaration() -> None:
    before = Quota.of_gpu(50, 100)
    after = before.replace("gpu", guarantee=25).keep_others(
        Quota((Line(0, 0), Line(2000, None), Line(None, None)), 100), "gpu"
    )
    assert before.changes(after) == {"gpu_quota": ["0.5", "0.25"], "cpu_quota": ["", "2"]}
    assert (
        labels.changes(before.changes(after))
        == "GPU guarantee 0.5 → 0.25, CPU guarantee none → 2 cores"
    )
    assert after.describe() == (
        "guarantee 0.25 GPU, limit 1 GPU, weight 1, priority 100, 2 CPU cores"
    )


def test_a_resource_added_to_the_declaration_reaches_every_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What iterates the declaration at call time sees a new resource with no other
    change: parsing, the fit rule, display, messages, the forms' fields and labels."""
    monkeypatch.setattr(quota, "RESOURCES", (*quota.RESOURCES, DISK))
    typed = {"gpu_quota": "0.5", "gpu_limit": "1", "ephemeral-storage_quota": "20"}
    parsed = quota.parse({**typed, "ephemeral-storage_limit": "50"}, capacity=None)
    assert parsed["ephemeral-storage"] == Line(20_000, 50_000)
    problems = parsed.problems({**POOL, "ephemeral-storage": 30_000})
    assert problems == {
        "ephemeral-storage_limit": "the limit (50 GB) cannot exceed the pool of 30 GB: "
        "enter 30 or less"
    }
    assert parsed.display()["ephemeral-storage_limit"] == "50"
    assert parsed.describe().endswith(", 20 GB disk")
    names = [f.name for f in labels.form_fields()]
    assert names[-2:] == ["ephemeral-storage_quota", "ephemeral-storage_limit"]
    assert quota.field_labels()["ephemeral-storage_limit"] == ("Disk limit", "GB")
