"""Every event the portal records: one enumeration, its values the audit trail's actions.

An event is recorded once, with the change it describes (``notifications.events.record``):
its audit row always and, for the events people hear of (``HEARD`` below: the topic a
person mutes it by, who hears of it, where its link points), the notifications and
deliveries. Its words for people are in ``templates/events/<value>.txt``. Adding an event
is a member here, its ``HEARD`` row if people hear of it, and its template.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Event(StrEnum):
    # Signing in and API tokens
    SIGNED_IN = "auth.signed_in"
    SIGN_IN_FAILED = "auth.sign_in_failed"
    TOKEN_CREATED = "token.created"  # noqa: S105 (an action's name, not a secret)
    TOKEN_REVOKED = "token.revoked"  # noqa: S105
    TOKEN_USED = "token.used"  # noqa: S105
    # The pool
    POOL_CREATED = "pool.created"
    POOL_UPDATED = "pool.updated"
    POOL_REMOVED = "pool.removed"
    # Requests and their decisions
    REQUEST_SUBMITTED = "request.submitted"
    REQUEST_APPROVED = "request.approved"
    REQUEST_ADJUSTED = "request.adjusted"  # approved with changes
    REQUEST_REJECTED = "request.rejected"
    QUOTA_CHANGE_SUBMITTED = "quota_change.submitted"
    QUOTA_CHANGE_APPROVED = "quota_change.approved"
    QUOTA_CHANGE_ADJUSTED = "quota_change.adjusted"  # approved with changes
    QUOTA_CHANGE_REJECTED = "quota_change.rejected"
    QUOTA_CHANGE_APPLIED = "quota_change.applied"
    # Temporary quota grants
    GRANT_SUBMITTED = "grant.submitted"
    GRANT_APPROVED = "grant.approved"
    GRANT_REJECTED = "grant.rejected"
    GRANT_STARTED = "grant.started"  # added to the team's quota
    GRANT_ENDING = "grant.ending"  # ends within the notice (PORTAL_GRANT_NOTICE_HOURS)
    GRANT_ENDED = "grant.ended"  # taken back (or withdrawn before a decision)
    # GPU-hour budgets
    BUDGET_SET = "budget.set"
    BUDGET_ALERT = "budget.alert"  # a threshold crossed (PORTAL_BUDGET_ALERTS)
    BUDGET_LIMITED = "budget.limited"  # spent: no more borrowing until the month ends
    BUDGET_RESTORED = "budget.restored"  # the month over: the limit put back
    # A team's people and life
    MEMBER_ADDED = "team.member_added"
    MEMBER_REMOVED = "team.member_removed"
    DECOMMISSION_REQUESTED = "team.decommission_requested"
    DECOMMISSIONED = "team.decommissioned"
    TEAM_READY = "team.ready"
    TEAM_RECOVERED = "team.recovered"
    # Provisioning
    PROVISIONING_FAILED = "provisioning.failed"
    PROVISIONING_FAILING = "provisioning.failing"  # failed a few times in a row: people told
    PROVISIONING_RETRY = "provisioning.retry"
    DRIFT_REPAIRED = "provisioning.drift_repaired"
    REPAIRS_ACKNOWLEDGED = "provisioning.repairs_acknowledged"  # an admin has seen them
    VCLUSTER_UPGRADED = "vcluster.upgraded"
    ROLLOUT_STARTED = "vcluster.rollout_started"  # the first team takes its turn
    ROLLOUT_DONE = "vcluster.rollout_done"  # the last team of a rollout has moved
    ROLLOUT_STOPPED = "vcluster.rollout_stopped"
    ROLLOUT_RESUMED = "vcluster.rollout_resumed"
    SIMULATED_RESTARTED = "provisioning.simulated_restarted"  # the in-memory cluster restored
    # Sleep and wake
    SLEEP_ASKED = "vcluster.sleep_asked"  # by a person, or the org's policy
    SLEEP_SOON = "vcluster.sleep_soon"  # the policy will pause it within the hour
    VCLUSTER_ASLEEP = "vcluster.asleep"  # seen paused (by the portal or by hand)
    WAKE_ASKED = "vcluster.wake_asked"
    VCLUSTER_AWAKE = "vcluster.awake"  # its control plane answers again
    # Personal kubeconfigs
    KUBECONFIG_ISSUED = "kubeconfig.issued"
    KUBECONFIG_REVOKED = "kubeconfig.revoked"
    KUBECONFIG_EXPIRING = "kubeconfig.expiring"
    # Cluster templates
    TEMPLATE_CREATED = "template.created"
    TEMPLATE_PUBLISHED = "template.published"  # a new version
    TEMPLATE_CHANGED = "template.changed"  # its description or settings
    TEMPLATE_REQUIRED = "template.required"  # the org's "non-admins choose a template"
    TEMPLATE_ACCEPTED = "template.accepted"  # a lead moved the team to the newest version
    TEMPLATE_DRIFTED = "template.drifted"  # found missing inside a vCluster, not put back
    # Notifications and usage
    WEBHOOK_SET = "webhook.set"
    WEBHOOK_REMOVED = "webhook.removed"
    RIGHTSIZING_DIGEST = "rightsizing.digest"
    # KAI's decisions about the teams' work
    WORKLOAD_EVICTED = "workload.evicted"  # one notice per burst of evictions
    WORKLOAD_WAITING = "workload.waiting"  # a workload waited long (timeline only)


class Audience(StrEnum):
    REQUESTER = "requester"  # who asked (``requester_id``)
    LEADS = "leads"  # the team's leads
    ADMINS = "admins"  # every admin
    PERSON = "person"  # the one person it is about (``person_id``)


@dataclass(frozen=True)
class Heard:
    topic: str  # a key of notifications.service.EVENTS: what a person mutes it by
    audience: tuple[Audience, ...]
    link: str = "/teams/{team_id}"


_DECIDED = (Audience.REQUESTER, Audience.LEADS)

HEARD: dict[Event, Heard] = {
    Event.REQUEST_SUBMITTED: Heard("request.submitted", (Audience.ADMINS,), "/admin/requests"),
    Event.QUOTA_CHANGE_SUBMITTED: Heard(
        "quota_change.submitted", (Audience.ADMINS,), "/admin/requests"
    ),
    Event.REQUEST_APPROVED: Heard("request.approved", _DECIDED),
    Event.QUOTA_CHANGE_APPROVED: Heard("request.approved", _DECIDED),
    Event.REQUEST_ADJUSTED: Heard("request.adjusted", _DECIDED),
    Event.QUOTA_CHANGE_ADJUSTED: Heard("request.adjusted", _DECIDED),
    Event.REQUEST_REJECTED: Heard("request.rejected", _DECIDED),
    Event.QUOTA_CHANGE_REJECTED: Heard("request.rejected", _DECIDED),
    Event.TEAM_READY: Heard("cluster.ready", (Audience.LEADS,)),
    Event.TEAM_RECOVERED: Heard("cluster.ready", (Audience.LEADS,)),
    Event.PROVISIONING_FAILING: Heard("cluster.failed", (Audience.LEADS, Audience.ADMINS)),
    Event.GRANT_SUBMITTED: Heard("grant.submitted", (Audience.ADMINS,), "/admin/requests#grants"),
    Event.GRANT_APPROVED: Heard("request.approved", _DECIDED),
    Event.GRANT_REJECTED: Heard("request.rejected", _DECIDED),
    Event.GRANT_STARTED: Heard("quota.grant", (Audience.LEADS,)),
    Event.GRANT_ENDING: Heard("quota.grant", (Audience.LEADS,)),
    Event.GRANT_ENDED: Heard("quota.grant", (Audience.LEADS,)),
    Event.BUDGET_ALERT: Heard("quota.budget", (Audience.LEADS, Audience.ADMINS)),
    Event.BUDGET_LIMITED: Heard("quota.budget", (Audience.LEADS, Audience.ADMINS)),
    Event.BUDGET_RESTORED: Heard("quota.budget", (Audience.LEADS,)),
    Event.MEMBER_ADDED: Heard("team.member_added", (Audience.PERSON,)),
    Event.KUBECONFIG_EXPIRING: Heard("kubeconfig.expiring", (Audience.PERSON,)),
    Event.RIGHTSIZING_DIGEST: Heard("rightsizing.digest", (Audience.LEADS,)),
    Event.WORKLOAD_EVICTED: Heard(
        "workload.evicted", (Audience.LEADS,), "/teams/{team_id}#workloads"
    ),
    Event.SLEEP_SOON: Heard("cluster.sleep", (Audience.LEADS,), "/teams/{team_id}#keep-awake"),
    Event.VCLUSTER_ASLEEP: Heard("cluster.sleep", (Audience.LEADS,)),
    Event.WAKE_ASKED: Heard("cluster.sleep", (Audience.LEADS,)),
}
