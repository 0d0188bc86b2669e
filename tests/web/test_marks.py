"""Marks drawn in Python: the share gauge, the admins' overview row (what a person reads in
each cell, the row's highlight), the team page's activity timeline and its provisioning
steps; every text a person or a cluster wrote escaped (team names, template labels,
errors, summaries, actors, messages)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from app.core.models import AuditEvent, ProvisioningStep, Step, StepStatus
from app.teams.repository import RowSuggestion, TeamRow
from app.usage.service import GpuShare
from app.web.gauge import gauge
from app.web.marks import overview_row, steps, timeline

SHARE = GpuShare(guaranteed=1.5, limit=3, allocated=1.5, requested=1.5, pool=8, fair_now=1.5)


def _row(**changes: object) -> TeamRow:
    fields: dict[str, object] = {
        "id": 7,
        "name": "nlp",
        "status": "ready",
        "quota_centi": 150,
        "limit_centi": 300,
        "last_error": None,
    }
    fields.update(changes)
    return TeamRow(**fields)  # type: ignore[arg-type]


def _cells(html: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)
    ]


def test_a_row_shows_the_team_its_status_guarantee_limit_and_gauge() -> None:
    html = str(overview_row(_row(), SHARE))
    assert html.startswith('<tr class="">')
    assert '<a href="/teams/7"><b>nlp</b></a>' in html
    assert '<span class="pill pill-ready">ready</span>' in html
    name, status, guarantee, limit, gauge = _cells(html)
    assert (name, status, guarantee, limit) == ("nlp", "ready", "1.5", "3")
    assert "Guaranteed 1.5" in gauge
    assert 'class="gauge gauge-compact"' in html


def test_borrowing_waiting_and_failed_rows_are_marked_and_say_how_much() -> None:
    borrowing = GpuShare(guaranteed=1.5, limit=3, allocated=2.25, requested=2.25, pool=8)
    html = str(overview_row(_row(), borrowing))
    assert html.startswith('<tr class="row-borrowing">')
    assert '<div class="small tag-borrow">borrowing 0.75</div>' in html
    waiting = GpuShare(guaranteed=1.5, limit=3, allocated=1, requested=1.4, pool=8)
    html = str(overview_row(_row(last_error="quota refused"), waiting))
    assert html.startswith('<tr class="row-pending row-failed">')
    assert '<div class="small tag-pending">0.4 waiting</div>' in html
    assert '<div class="small error-text">quota refused</div>' in html
    # Below the threshold a person would notice: neither marked nor said.
    hair = GpuShare(guaranteed=1.5, limit=3, allocated=1, requested=1.004, pool=8)
    assert "waiting" not in str(overview_row(_row(), hair))


def test_a_suggestion_shows_only_for_the_guarantee_it_was_made_for() -> None:
    idle = RowSuggestion("lower", guarantee_centi=150, suggested_centi=50)
    html = str(overview_row(_row(suggestion=idle), SHARE))
    assert '<div class="small tag-idle">idle: suggest 0.5</div>' in html
    starved = RowSuggestion("raise", guarantee_centi=150, suggested_centi=250)
    assert "starved: suggest 2.5" in str(overview_row(_row(suggestion=starved), SHARE))
    stale = RowSuggestion("lower", guarantee_centi=200, suggested_centi=50)
    assert "suggest" not in str(overview_row(_row(suggestion=stale), SHARE))


def test_teams_without_a_cluster_show_no_gauge() -> None:
    for status in ("rejected", "decommissioned"):
        html = str(overview_row(_row(status=status), SHARE))
        assert '<span class="muted small">no cluster</span>' in html
        assert "<figure" not in html


def test_what_a_person_wrote_is_escaped_and_an_error_cut_short() -> None:
    error = "<script>alert(1)</script> & more " * 10
    html = str(
        overview_row(_row(name='a<b>&"c', template_label="kf <v2>", last_error=error), SHARE)
    )
    assert "<script>" not in html
    assert "<b>a&lt;b&gt;&amp;&#34;c</b>" in html
    assert '<span class="tag-version" data-row-template>kf &lt;v2&gt;</span>' in html
    shown = re.search(r'<div class="small error-text">(.*?)</div>', html)
    assert shown is not None
    assert shown.group(1).startswith("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more")
    assert (
        len(shown.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")) == 120
    )


def _texts(html: str, tag: str) -> list[str]:
    return [
        " ".join(re.sub(r"<[^>]+>", " ", item).split())
        for item in re.findall(rf"<{tag}[^>]*>(.*?)</{tag}>", html, re.S)
    ]


def test_the_timeline_lists_each_event_with_its_kind_age_summary_and_actor() -> None:
    now = datetime.now(UTC)
    events = [
        AuditEvent(
            at=now - timedelta(minutes=3, seconds=20),
            action="team.ready",
            summary="Cluster ready",
            actor="worker",
        ),
        AuditEvent(
            at=now - timedelta(hours=2, minutes=1),
            action="request.approved",
            summary="Approved <b>2</b> & more",
            actor="<script>x</script>",
        ),
    ]
    html = str(timeline(events))
    assert re.findall(r'<li class="([^"]+)">', html) == ["tl-team", "tl-request"]
    assert _texts(html, "li") == [
        "3 min ago Cluster ready — worker",
        "2 h ago Approved &lt;b&gt;2&lt;/b&gt; &amp; more — &lt;script&gt;x&lt;/script&gt;",
    ]
    assert "<script>" not in html
    assert "<b>" not in html
    assert str(timeline([])) == '<li class="muted">Nothing yet.</li>'


def test_the_steps_show_their_icon_name_condition_age_and_message() -> None:
    now = datetime.now(UTC)
    conditions = [
        ProvisioningStep(
            step=Step.QUEUE, status=StepStatus.DONE, message="", updated_at=now - timedelta(hours=1)
        ),
        ProvisioningStep(
            step=Step.VCLUSTER,
            status=StepStatus.FAILED,
            message='chart refused: <b>"rbac"</b>',
            updated_at=now - timedelta(minutes=5, seconds=3),
        ),
        ProvisioningStep(
            step=Step.KUBECONFIG, status=StepStatus.PENDING, message="", updated_at=now
        ),
    ]
    html = str(steps(conditions))
    assert re.findall(r'<li class="step step-(\w+)">', html) == ["done", "failed", "pending"]
    assert re.findall(r'aria-hidden="true">(.)</span>', html) == ["✓", "!", "○"]
    assert _texts(html, "li") == [
        "✓ KAI queue done · 1 h ago",
        "! vCluster failed · 5 min ago chart refused: &lt;b&gt;&#34;rbac&#34;&lt;/b&gt;",
        "○ Kubeconfig pending",  # no time while nothing has happened yet
    ]
    assert str(steps([])) == ""


def _same(html: str) -> str:
    """Markup as a browser lays it out: whitespace between tags and runs of it are one."""
    return re.sub(r">\s+<", "><", " ".join(str(html).split())).strip()


def _twin(name: str, **context: object) -> str:
    """The readable template of a mark (``templates/marks/``), rendered with the page's
    environment."""
    from app.teams.repository import NOT_LIVE
    from app.web.marks import ERROR_SHOWN, STEP_ICONS, STEP_LABELS
    from app.web.templating import templates

    template = templates.env.get_template(f"marks/{name}.html")
    return template.render(
        now=datetime.now(UTC),
        icons=STEP_ICONS,
        labels=STEP_LABELS,
        error_shown=ERROR_SHOWN,
        not_live=NOT_LIVE,
        **context,
    )


def test_each_mark_equals_its_readable_template() -> None:
    """The marks are the fast path of three templates kept beside them (what a newcomer
    reads and changes first): the same markup for every kind of row, event and step."""
    rows = [
        (_row(), SHARE),
        (_row(status="provisioning", template_label="kubeflow <v2>"), SHARE),
        (_row(last_error="x" * 200 + "<b>"), SHARE),
        (_row(status="submitted"), SHARE),
        (
            _row(suggestion=RowSuggestion("lower", 150, 50)),
            GpuShare(guaranteed=1.5, limit=3, allocated=2.5, requested=3.2, pool=8),
        ),
        (
            _row(suggestion=RowSuggestion("raise", 150, 250), name="a&b"),
            GpuShare(guaranteed=1.5, limit=3, allocated=1.0, requested=2.0, pool=8),
        ),
    ]
    for team, share in rows:
        assert _same(overview_row(team, share)) == _same(
            _twin("overview_row", team=team, share=share)
        )
    in_pools = [
        ("l40s", GpuShare(guaranteed=1, limit=2, allocated=1.5, requested=2, pool=2)),
        ("a100", GpuShare(guaranteed=0.5, limit=-1, allocated=None, requested=None, pool=4)),
    ]
    team, share = rows[0]
    assert _same(overview_row(team, share, in_pools)) == _same(
        _twin("overview_row", team=team, share=share, pools=in_pools)
    )
    assert 'data-pool-gauge="l40s"' in str(overview_row(team, share, in_pools))
    now = datetime.now(UTC)
    events = [
        AuditEvent(at=now - timedelta(minutes=3, seconds=20), action="team.ready",
                   summary="Cluster ready", actor="worker"),
        AuditEvent(at=now - timedelta(hours=2, minutes=1), action="request.approved",
                   summary="Approved <b>2</b> & more", actor="<script>x</script>"),
    ]  # fmt: skip
    for listed in (events, []):
        assert _same(timeline(listed)) == _same(_twin("timeline", events=listed))
    conditions = [
        ProvisioningStep(step=Step.QUEUE, status=StepStatus.DONE, message="",
                         updated_at=now - timedelta(hours=1)),
        ProvisioningStep(step=Step.VCLUSTER, status=StepStatus.FAILED,
                         message='chart refused: <b>"rbac"</b>',
                         updated_at=now - timedelta(minutes=5, seconds=3)),
        ProvisioningStep(step=Step.KUBECONFIG, status=StepStatus.PENDING, message="",
                         updated_at=now),
    ]  # fmt: skip
    for listed_steps in (conditions, []):
        assert _same(steps(listed_steps)) == _same(_twin("steps", conditions=listed_steps))


def test_the_gauge_equals_its_readable_template() -> None:
    """Every kind of gauge (within the guarantee, borrowing, waiting for an admin, not
    reported, no reading, above the pool, another resource without a limit), full and
    compact: the same markup from the fast path and from ``templates/marks/gauge.html``."""
    shares = [
        SHARE,
        GpuShare(guaranteed=1.5, limit=3, allocated=2.25, requested=2.5, pool=8, fair_now=2),
        GpuShare(guaranteed=0.5, limit=1, allocated=None, requested=None, pool=2, asked=True),
        GpuShare(guaranteed=1, limit=2, allocated=None, requested=None, pool=4, unreported=True),
        GpuShare(guaranteed=0.33, limit=1, allocated=None, requested=None, pool=1),
        GpuShare(guaranteed=2, limit=12, allocated=9.5, requested=14, pool=8, fair_now=7.25),
        GpuShare(guaranteed=20, limit=-1, allocated=5, requested=5, pool=100, unit="cores"),
    ]
    for share in shares:
        for compact in (False, True):
            fast = gauge.__wrapped__(share, compact)
            assert _same(fast) == _same(_twin("gauge", share=share, compact=compact)), share
