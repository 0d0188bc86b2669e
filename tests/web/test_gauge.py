"""The GPU gauge's drawing: where each mark sits on the 300-unit bar, and what the
compact (table row) and the asked (not approved) variants leave out or say instead."""

from __future__ import annotations

import re

from app.usage.service import GpuShare
from app.web.gauge import gauge


def _attrs(svg: str, cls: str) -> dict[str, str]:
    found = re.search(rf'<\w+ [^>]*class="{cls}"[^>]*>', svg)
    assert found, f"no {cls} mark"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', found.group(0)))


def test_marks_sit_at_their_share_of_the_pool() -> None:
    # An 8-GPU pool: guarantee 2, using 3 (1 borrowed), asking 5, fair share 2.5, limit 4.
    html = str(
        gauge(GpuShare(guaranteed=2, limit=4, allocated=3, requested=5, pool=8, fair_now=2.5))
    )
    assert _attrs(html, "g-quota")["width"] == "75.0"
    assert _attrs(html, "g-used")["width"] == "75.0", "use up to the guarantee"
    assert (_attrs(html, "g-borrowed")["x"], _attrs(html, "g-borrowed")["width"]) == (
        "75.0",
        "37.5",
    )
    assert _attrs(html, "g-fair")["d"].startswith("M93.8 ")
    assert _attrs(html, "g-demand")["d"].startswith("M187.5 ")
    assert _attrs(html, "g-limit")["x1"] == "150.0"
    label = "Guaranteed 2 GPU, in use 3, requested 5, fair share now 2.5, limit 4 of a 8 GPU pool"
    assert f'aria-label="{label}"' in html
    assert f"<title>{label}</title>" in html
    assert (
        'In use <b data-gauge="allocated">3</b> <em>(<span data-gauge="borrowed">1</span>' in html
    )
    assert 'Fair share now <b data-gauge="fair">2.5</b>' in html
    assert "of 8 GPU pool" in html


def test_compact_keeps_the_marks_and_leaves_out_the_figures() -> None:
    """The overview's legend describes the fair-share mark: the compact gauge draws it;
    the figures and the pool size are left to the team page."""
    html = str(
        gauge(
            GpuShare(guaranteed=1, limit=2, allocated=0.5, requested=None, pool=4, fair_now=1),
            compact=True,
        )
    )
    assert 'class="gauge gauge-compact"' in html
    assert _attrs(html, "g-fair")["d"].startswith("M75.0 ")
    for left_out in ("Fair share now", "GPU pool</span>", "g-borrowed", "g-demand"):
        assert left_out not in html
    assert "requested \u2013" in html, "no demand reads as a dash, not 0"


def test_a_limit_beyond_the_pool_stays_on_the_bar() -> None:
    html = str(gauge(GpuShare(guaranteed=1, limit=20, allocated=None, requested=0, pool=8)))
    # The scale grows to the limit; the line is kept one unit inside the bar's end.
    assert _attrs(html, "g-limit")["x1"] == "299"
    assert _attrs(html, "g-quota")["width"] == "15.0"
    assert "g-used" not in html, "no usage known: no bar"


def test_asked_and_unreported_say_so() -> None:
    asked = str(
        gauge(
            GpuShare(guaranteed=0.2, limit=0.5, allocated=None, requested=None, pool=8, asked=True)
        )
    )
    assert 'Asked guarantee <b data-gauge="guaranteed">0.2</b>' in asked
    assert "waiting for an admin: nothing runs yet" in asked
    assert 'Asked limit <b data-gauge="limit">0.5</b>' in asked
    unreported = str(
        gauge(
            GpuShare(guaranteed=1, limit=1, allocated=None, requested=None, pool=8, unreported=True)
        )
    )
    assert "In use: not reported by this KAI version" in unreported
    assert 'data-gauge="allocated"' not in unreported
