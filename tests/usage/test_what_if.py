"""The what-if arithmetic as the usage domain does it: pure, over quota rows and changes
already parsed (the page's form is read elsewhere)."""

from __future__ import annotations

from app.core.quota import Quota
from app.usage.service import TeamQuota
from app.usage.sources import QueueUsage
from app.usage.what_if import changed_rows, what_if

ROWS = [
    TeamQuota(id=i, name=name, quota_centi=33, limit_centi=100, weight_centi=100,
              priority=100, created=i)
    for i, name in enumerate(("nlp", "vision", "recommender"), start=1)
]  # fmt: skip
BUSY = {f"team-{r.name}": QueueUsage(allocated_gpu=0.33, requested_gpu=1.0) for r in ROWS}


def values(quota: int, limit: int = 100) -> Quota:
    return Quota.of_gpu(quota, limit)


def test_only_the_changed_teams_get_new_rows() -> None:
    rows = changed_rows(ROWS, {2: values(50)})
    assert list(rows) == [2]
    assert rows[2].quota_centi == 50
    assert rows[2].name == "vision", "the rest of the row is the team's own"


def test_a_bigger_pool_and_a_raised_guarantee_move_every_busy_team() -> None:
    result = what_if(
        ROWS,
        BUSY,
        pool_centi=100,
        parent="ml-org",
        changes={2: values(50)},
        new_pool_centi=200,
    )
    assert (result.pool_before, result.pool_after) == (1.0, 2.0)
    by_name = {t.name: t for t in result.teams}
    assert by_name["vision"].is_subject
    assert (by_name["vision"].guarantee_before, by_name["vision"].guarantee_after) == (0.33, 0.5)
    assert not by_name["nlp"].is_subject
    assert by_name["nlp"].guarantee_after == 0.33
    assert sum(t.busy_after or 0 for t in result.teams) <= 2.0 + 1e-9


def test_nothing_changed_is_today() -> None:
    result = what_if(ROWS, BUSY, pool_centi=100, parent="ml-org", changes={}, new_pool_centi=100)
    assert result.pool_after == 1.0
    assert all(not t.is_subject for t in result.teams)
    assert [t.busy_after for t in result.teams] == [t.busy_before for t in result.teams]
