"""A decision's impact built only for the teams whose numbers may move is the full
impact's moved teams, exactly: the same rows, the same figures, the same reclaims, on
random orgs and decisions (a guarantee raised, a new team, the pool changed, past use
tried), with and without KAI's top level; of the teams KAI may take running work
from, the largest are built (the pages name six)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from app.usage.division import OrgInputs, divide_org
from app.usage.impact import Impact, impact
from app.usage.service import Model, TeamQuota
from tests.usage.test_division import PARENT, _org


@pytest.mark.parametrize("seed", range(40))
def test_the_moved_teams_are_those_of_the_full_impact(seed: int) -> None:
    rng = random.Random(seed)
    rows, usage, model, _ = _org(rng, rng.choice([4, 30, 300, 2000]))
    pool = rng.randint(1, 3 * len(rows) * 100)
    changes: dict[int, TeamQuota] = {}
    kind = seed % 4
    if kind == 0:
        row = rng.choice(rows)
        changes[row.id] = replace(row, gpu_quota_centi=row.gpu_quota_centi + rng.randint(1, 300))
    elif kind == 1:
        changes[99_999] = TeamQuota(99_999, "newcomer", 150, 400, 100, 100, created=10**9)
    after_model: Model | None = None
    if kind == 3:
        tried = {rows[0].queue_name: 0.5}
        after_model = replace(model, k_value=1.0, usage={**model.usage, **tried})
    before = divide_org(OrgInputs.of(rows, usage), pool_centi=pool, parent=PARENT, model=model)
    new_pool = pool + rng.choice([-150, 0, 100, 2500]) if kind == 2 else None

    def run(every_team: bool) -> Impact:
        return impact(
            rows,
            usage,
            pool_centi=pool,
            parent=PARENT,
            changes=changes,
            new_pool_centi=new_pool,
            before=before,
            model=model,
            after_model=after_model,
            also_changed={rows[0].id} if kind == 3 else (),
            every_team=every_team,
        )

    sparse, full = run(False), run(True)
    assert len(full.teams) == full.total == sparse.total
    assert sparse.changed == full.changed
    # The pages name the six largest: the same amounts, each team's figures its own.
    shown = sparse.reclaims[:6]
    assert [t.reclaimable for t in shown] == [t.reclaimable for t in full.reclaims[:6]]
    every = {t.team_id: t for t in full.teams}
    assert all(every[t.team_id] == t for t in sparse.teams)
    assert sparse.losers == full.losers
    assert sparse.unchanged == full.unchanged
    assert len(sparse.teams) <= len(full.teams)
    if kind in (0, 1):
        assert any(t.is_subject for t in sparse.changed), "the subject is always built"
