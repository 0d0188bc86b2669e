"""The share gauge (GPUs, or another divided resource): guarantee, use, demand, fair
share and limit against the pool, drawn as one SVG bar with its legend.

Built in Python, not as a Jinja macro: the admin overview draws one per row, and a macro
call with its dozen filters cost about half of that page's rendering.
"""

from __future__ import annotations

import functools

from markupsafe import Markup, escape

from app.core.quantities import format_figure as num
from app.usage.service import GpuShare

WIDTH = 300


def _x(value: float, scale: float) -> float:
    """A value's position on the bar, to a tenth of a unit."""
    return round(value / scale * WIDTH, 1)


@functools.lru_cache(maxsize=2048)
def gauge(share: GpuShare, compact: bool = False) -> Markup:
    """The gauge of ``share``; ``compact`` (a table row, a card) keeps every mark the
    legend describes (the fair share's included) and leaves out the demand and
    fair-share figures and the pool size.

    Kept for the shares seen last (a share is immutable and compares by value): the org
    view, and so every unchanged team's share, lasts until usage or quotas move."""
    s = share.scale
    g = share.guaranteed
    a = share.allocated
    # Each figure formatted once: the label and the legend both show them.
    g_, a_, requested, fair, limit = (
        num(g),
        num(a),
        num(share.requested),
        num(share.fair_now),
        num(share.limit) if share.limit >= 0 else "none",  # KAI's unlimited
    )
    pool = num(share.pool)
    unit = share.unit
    label = escape(
        f"Guaranteed {g_} {unit}, in use {a_}, requested {requested}, "
        f"fair share now {fair}, limit {limit} of a {pool} {unit} pool"
    )
    bars = [
        f'<rect class="g-track" x="0" y="10" width="{WIDTH}" height="16" rx="3"></rect>',
        f'<rect class="g-quota" x="0" y="10" width="{_x(g, s)}" height="16" rx="3"></rect>',
    ]
    if a is not None:
        bars.append(
            f'<rect class="g-used" x="0" y="13" width="{_x(min(a, g), s)}" height="10"></rect>'
        )
        if a > g:
            bars.append(
                f'<rect fill="url(#gauge-hatch)" class="g-borrowed" x="{_x(g, s)}" y="13" '
                f'width="{_x(a - g, s)}" height="10"></rect>'
            )
    if share.fair_now is not None:
        bars.append(f'<path class="g-fair" d="M{_x(share.fair_now, s)} 27 l-4 6 h8 z"></path>')
    if share.requested is not None and share.requested > 0:
        bars.append(f'<path class="g-demand" d="M{_x(share.requested, s)} 9 l-4 -7 h8 z"></path>')
    at = share.limit if share.limit >= 0 else s  # unlimited: at the bar's end
    limit_x = round(min(at / s * WIDTH, WIDTH - 1), 1)
    bars.append(f'<line class="g-limit" x1="{limit_x}" x2="{limit_x}" y1="4" y2="32"></line>')

    legend = [
        '<span><i class="sw sw-quota" aria-hidden="true"></i>'
        f"{'Asked guarantee' if share.asked else 'Guaranteed'} "
        f'<b data-gauge="guaranteed">{g_}</b></span>'
    ]
    if share.asked:
        legend.append(
            '<span class="muted" data-gauge="state">waiting for an admin: nothing runs yet</span>'
        )
    elif share.unreported:
        legend.append(
            '<span class="muted" data-gauge="state">In use: not reported by this KAI version</span>'
        )
    else:
        borrowed = (
            f' <em>(<span data-gauge="borrowed">{num(share.borrowed)}</span> borrowed)</em>'
            if share.borrowed > 0
            else ""
        )
        legend.append(
            '<span><i class="sw sw-used" aria-hidden="true"></i>'
            f'In use <b data-gauge="allocated">{a_}</b>{borrowed}</span>'
        )
    if not compact:
        legend.append(
            '<span><i class="sw sw-demand" aria-hidden="true"></i>'
            f'Requested <b data-gauge="requested">{requested}</b></span>'
        )
        legend.append(
            '<span><i class="sw sw-fair" aria-hidden="true"></i>'
            f'Fair share now <b data-gauge="fair">{fair}</b></span>'
        )
    legend.append(
        '<span><i class="sw sw-limit" aria-hidden="true"></i>'
        f"{'Asked limit' if share.asked else 'Limit'} "
        f'<b data-gauge="limit">{limit}</b></span>'
    )
    if not compact:
        legend.append(f'<span class="muted">of {pool} {escape(unit)} pool</span>')

    svg_lines = "\n    ".join(bars)
    legend_lines = "\n    ".join(legend)
    # Numbers, fixed words and the escaped label only: nothing a person typed.
    return Markup(  # noqa: S704 - every interpolated value above is a number or escaped
        f'<figure class="gauge{" gauge-compact" if compact else ""}">\n'
        f'  <svg viewBox="0 0 {WIDTH} 34" role="img" aria-label="{label}" '
        'preserveAspectRatio="none">\n'
        f"    <title>{label}</title>\n"
        f"    {svg_lines}\n"
        "  </svg>\n"
        '  <figcaption class="g-legend">\n'
        f"    {legend_lines}\n"
        "  </figcaption>\n"
        "</figure>"
    )
