"""A decision's impact built only for the teams whose numbers may move is the full
impact's moved teams, exactly: the same rows, the same figures, the same reclaims, on
random orgs and decisions (a guarantee raised, a new team, the pool changed, past use
tried), with and without KAI's top level; of the teams KAI may take running work
from, the largest are built (the pages name six)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import numpy.typing as npt
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
        changes[row.id] = replace(row, quota_centi=row.quota_centi + rng.randint(1, 300))
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


@pytest.mark.parametrize("seed", range(12))
def test_decisions_over_one_ready_division_are_each_their_full_impact(seed: int) -> None:
    # The ready view's division serves every keystroke until the next view: what is
    # found once for it (who may run above what they keep) is patched per decision,
    # never changed by one.
    rng = random.Random(500 + seed)
    rows, usage, model, _ = _org(rng, rng.choice([30, 300, 2000]))
    pool = rng.randint(len(rows) * 50, 3 * len(rows) * 100)
    before = divide_org(OrgInputs.of(rows, usage), pool_centi=pool, parent=PARENT, model=model)
    reference: tuple[npt.NDArray[np.float64] | npt.NDArray[np.bool_], ...] | None = None
    for _ in range(6):
        row = rng.choice(rows)
        quota = max(0, row.quota_centi + rng.choice([-400, -100, 50, 300, 2000]))
        changes = {row.id: replace(row, quota_centi=quota)}

        def run(every_team: bool, changes: dict[int, TeamQuota] = changes) -> Impact:
            return impact(
                rows,
                usage,
                pool_centi=pool,
                parent=PARENT,
                changes=changes,
                before=before,
                model=model,
                every_team=every_team,
            )

        sparse, full = run(False), run(True)
        assert sparse.changed == full.changed
        assert [t.reclaimable for t in sparse.reclaims[:6]] == [
            t.reclaimable for t in full.reclaims[:6]
        ]
        every = {t.team_id: t for t in full.teams}
        assert all(every[t.team_id] == t for t in sparse.teams)
        found = before.derived["reclaims"]
        assert isinstance(found, tuple)
        copied = tuple(np.array(a, copy=True) for a in found)
        reference = reference or copied
        assert all(np.array_equal(a, b) for a, b in zip(reference, copied, strict=True))
