"""Marks drawn in Python, not in templates, where a page draws one per row: a status as a
pill, the admins' overview row (a team's name, status, guarantee, limit and gauge), and
the team page's activity timeline and provisioning steps. Each of the last three is the
fast path of a readable template beside it (``templates/marks/``), which
``tests/web/test_marks.py`` holds equal to it: change both.

The overview draws 50 rows: the template's eight outputs a row, each escaped on its own,
with the conditions around them, were about half of that page's rendering; the team
page's 20 events and five steps about a third of its (profiled). Names, template labels,
errors, summaries, actors and a cluster's messages are text someone wrote: each is
escaped here; everything else is a number, a status, a moment or fixed words.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime

from markupsafe import Markup, escape

from app.core.models import AuditEvent, ProvisioningStep
from app.core.quantities import format_figure as num
from app.core.quantities import format_hundredths as gpu
from app.teams.repository import NOT_LIVE, TeamRow
from app.usage.service import GpuShare
from app.web.gauge import gauge
from app.web.moments import when

ERROR_SHOWN = 120  # characters of the last error a row shows

STEP_LABELS = {
    "queue": "KAI queue",
    "namespace": "Host namespace",
    "vcluster": "vCluster",
    "admission_policy": "Queue pinning policy",
    "kubeconfig": "Kubeconfig",
}
STEP_ICONS = {"done": "✓", "removed": "✓", "failed": "!", "progressing": "…", "pending": "○"}

RETRYING_PILL = Markup(
    '<span class="pill pill-provisioning" '
    'title="the last attempt failed; the portal tries again by itself">retrying</span>'
)


@functools.lru_cache(maxsize=64)
def status_pill(status: str, retrying: bool = False) -> Markup:
    """A status as a coloured pill ("retrying" while an automatic retry is coming).
    Python, not a macro: the overview draws one per row."""
    if retrying:
        return RETRYING_PILL
    return Markup('<span class="pill pill-{0}">{1}</span>').format(
        str(status), str(status).replace("_", " ")
    )


def overview_row(
    team: TeamRow, share: GpuShare, pools: Sequence[tuple[str, GpuShare]] = ()
) -> Markup:
    """The overview table's row of ``team`` with its ``share``, and under its gauge one
    per other node pool it holds quota in (``pools``: the pool's name and its share)."""
    borrowed, waiting = share.borrowed, share.pending
    classes = "row-borrowing" if borrowed > 0 else "row-pending" if waiting > 0.005 else ""
    if team.last_error:
        classes += " row-failed"
    name = f'<a href="/teams/{team.id}"><b>{escape(team.name)}</b></a>'
    if team.template_label:
        name += f' <span class="tag-version" data-row-template>{escape(team.template_label)}</span>'
    lending = (
        f'<div class="small tag-borrow">borrowing {num(borrowed)}</div>' if borrowed > 0 else ""
    )
    notes = (
        f'<div class="small tag-pending">{num(waiting)} waiting</div>' if waiting > 0.005 else ""
    )
    suggestion = team.suggestion
    if suggestion and suggestion.guarantee_centi == team.quota_centi:
        kind = "idle" if suggestion.direction == "lower" else "starved"
        notes += (
            f'<div class="small tag-{kind}">{kind}: suggest {gpu(suggestion.suggested_centi)}</div>'
        )
    if team.last_error:
        notes += f'<div class="small error-text">{escape(team.last_error[:ERROR_SHOWN])}</div>'
    drawn = (
        str(gauge(share, compact=True))
        if team.status not in NOT_LIVE
        else '<span class="muted small">no cluster</span>'
    )
    for pool, held in pools:
        drawn += (
            f'\n          <div class="pool-gauge" data-pool-gauge="{escape(pool)}">'
            f'<span class="small muted">in pool {escape(pool)}</span>'
            f"{gauge(held, compact=True)}</div>"
        )
    # Escaped above: the name, the template label and the error; the rest are numbers,
    # a status and fixed words.
    return Markup(  # noqa: S704 - every text a person wrote is escaped above
        f'<tr class="{classes}">\n'
        f"        <td>{name}\n"
        f"          {lending}\n"
        f"          {notes}</td>\n"
        f"        <td>{status_pill(team.status)}</td>\n"
        f'        <td class="num">{gpu(team.quota_centi)}</td>\n'
        f'        <td class="num">{gpu(team.limit_centi)}</td>\n'
        f'        <td class="gauge-col">{drawn}</td>\n'
        "      </tr>"
    )


def timeline(events: Sequence[AuditEvent]) -> Markup:
    """The team page's activity, newest first: one item an event, coloured by its kind,
    with how long ago it was (from one moment for the whole list), what happened and
    who did it. A summary and an actor are escaped; the rest is the code's own words."""
    if not events:
        return Markup('<li class="muted">Nothing yet.</li>')
    now = datetime.now(UTC)
    return Markup(  # noqa: S704 - every text is escaped or made from a datetime
        "\n    ".join(
            f'<li class="tl-{escape(event.action.split(".", 1)[0])}">\n'
            f"      {when(event.at, relative=True, now=now)}\n"
            f'      <span>{escape(event.summary)}</span> <span class="muted small">'
            f"— {escape(event.actor)}</span>\n"
            "    </li>"
            for event in events
        )
    )


def steps(conditions: Sequence[ProvisioningStep]) -> Markup:
    """The status card's provisioning steps, in order: an icon, the step's name, its
    condition and since when (from one moment for the whole list), and the cluster's
    message. Every text is escaped: a message can carry a cluster's words."""
    now = datetime.now(UTC)
    items = []
    for step in conditions:
        status = str(step.status)
        since = "" if status == "pending" else f" · {when(step.updated_at, relative=True, now=now)}"
        message = f'<div class="small">{escape(step.message)}</div>' if step.message else ""
        items.append(
            f'<li class="step step-{escape(status)}">\n'
            '      <span class="step-icon" aria-hidden="true">'
            f"{STEP_ICONS.get(status, '○')}</span>\n"
            "      <div>\n"
            f"        <b>{escape(STEP_LABELS.get(step.step, step.step))}</b> "
            f'<span class="small muted">{escape(status)}{since}</span>\n'
            f"        {message}\n"
            "      </div>\n"
            "    </li>"
        )
    return Markup("\n    ".join(items))  # noqa: S704 - every text is escaped or the code's
