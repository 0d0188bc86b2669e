"""Marks drawn in Python, not in templates, where a page draws one per row: a status as a
pill, and the admins' overview row (a team's name, status, guarantee, limit and gauge).

The overview draws 50 rows: the template's eight outputs a row, each escaped on its own,
with the conditions around them, were about half of that page's rendering. Names,
template labels and errors are the only text a person wrote: each is escaped here;
everything else is a number, a status or fixed words.
"""

from __future__ import annotations

import functools

from markupsafe import Markup, escape

from app.core.quantities import format_figure as num
from app.core.quantities import format_hundredths as gpu
from app.teams.repository import NOT_LIVE, TeamRow
from app.usage.service import GpuShare
from app.web.gauge import gauge

ERROR_SHOWN = 120  # characters of the last error a row shows

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


def overview_row(team: TeamRow, share: GpuShare) -> Markup:
    """The overview table's row of ``team`` with its ``share``."""
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
    if suggestion and suggestion.guarantee_centi == team.gpu_quota_centi:
        kind = "idle" if suggestion.direction == "lower" else "starved"
        notes += (
            f'<div class="small tag-{kind}">{kind}: suggest {gpu(suggestion.suggested_centi)}</div>'
        )
    if team.last_error:
        notes += f'<div class="small error-text">{escape(team.last_error[:ERROR_SHOWN])}</div>'
    drawn = (
        gauge(share, compact=True)
        if team.status not in NOT_LIVE
        else '<span class="muted small">no cluster</span>'
    )
    # Escaped above: the name, the template label and the error; the rest are numbers,
    # a status and fixed words.
    return Markup(  # noqa: S704 - every text a person wrote is escaped above
        f'<tr class="{classes}">\n'
        f"        <td>{name}\n"
        f"          {lending}\n"
        f"          {notes}</td>\n"
        f"        <td>{status_pill(team.status)}</td>\n"
        f'        <td class="num">{gpu(team.gpu_quota_centi)}</td>\n'
        f'        <td class="num">{gpu(team.gpu_limit_centi)}</td>\n'
        f'        <td class="gauge-col">{drawn}</td>\n'
        "      </tr>"
    )
