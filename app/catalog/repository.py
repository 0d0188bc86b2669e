"""The catalog's queries."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.core.models import LIVE_STATUSES, ClusterTemplate, Team, TeamStatus, TemplateVersion

# Teams a new template version is rolled to (a request not yet approved keeps the version
# it asked for; the approval gives it the version decided).
UPGRADED_STATUSES = (
    TeamStatus.APPROVED,
    TeamStatus.PROVISIONING,
    TeamStatus.READY,
    TeamStatus.FAILED,
)


def get_template(session: Session, template_id: int) -> ClusterTemplate:
    found = session.get(ClusterTemplate, template_id)
    if found is None:
        raise NotFound(f"no template #{template_id}")
    return found


def get_version(session: Session, version_id: int) -> TemplateVersion:
    found = session.get(TemplateVersion, version_id)
    if found is None:
        raise NotFound(f"no template version #{version_id}")
    return found


def find_version(session: Session, version_id: int | None) -> TemplateVersion | None:
    """The version, if there is one (as a request's ``template_version`` reads it)."""
    return session.get(TemplateVersion, version_id) if version_id is not None else None


def versions(session: Session, template_id: int) -> list[TemplateVersion]:
    """Newest first."""
    return list(
        session.scalars(
            select(TemplateVersion)
            .where(TemplateVersion.template_id == template_id)
            .order_by(TemplateVersion.number.desc())
        )
    )


def latest(session: Session, template_id: int) -> TemplateVersion:
    found = session.scalars(
        select(TemplateVersion)
        .where(TemplateVersion.template_id == template_id)
        .order_by(TemplateVersion.number.desc())
        .limit(1)
    ).first()
    if found is None:
        raise NotFound(f"template #{template_id} has no version")
    return found


def clear_default(session: Session) -> None:
    for template in session.scalars(
        select(ClusterTemplate).where(ClusterTemplate.is_default.is_(True))
    ):
        template.is_default = False


def newest_versions(session: Session) -> list[tuple[ClusterTemplate, TemplateVersion]]:
    """Every template with its newest version, the default first, then by name."""
    newest = (
        select(TemplateVersion.template_id, func.max(TemplateVersion.number).label("number"))
        .group_by(TemplateVersion.template_id)
        .subquery()
    )
    rows = session.execute(
        select(ClusterTemplate, TemplateVersion)
        .join(TemplateVersion, TemplateVersion.template_id == ClusterTemplate.id)
        .join(
            newest,
            (newest.c.template_id == TemplateVersion.template_id)
            & (newest.c.number == TemplateVersion.number),
        )
        .order_by(ClusterTemplate.is_default.desc(), ClusterTemplate.name)
    ).all()
    return [(template, version) for template, version in rows]


def live_team_counts(session: Session) -> dict[int, int]:
    """Template id -> how many live teams are wanted with one of its versions."""
    rows = session.execute(
        select(TemplateVersion.template_id, func.count(Team.id))
        .join(Team, Team.template_version_id == TemplateVersion.id)
        .where(Team.status.in_(LIVE_STATUSES))
        .group_by(TemplateVersion.template_id)
    ).all()
    return {int(t): int(n) for t, n in rows}


def name_taken(session: Session, name: str) -> bool:
    found = session.scalar(select(ClusterTemplate.id).where(ClusterTemplate.name == name))
    return found is not None


def teams_on_older(session: Session, *, template_id: int, to: TemplateVersion) -> list[Team]:
    """Every live team on an older version of the template than ``to``, by id."""
    older = select(TemplateVersion.id).where(
        TemplateVersion.template_id == template_id, TemplateVersion.number < to.number
    )
    return list(
        session.scalars(
            select(Team)
            .where(Team.template_version_id.in_(older), Team.status.in_(UPGRADED_STATUSES))
            .order_by(Team.id)
        )
    )
