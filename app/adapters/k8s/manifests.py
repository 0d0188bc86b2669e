"""Pure builders of the objects the portal writes to the host cluster. No I/O.

Queues follow KAI's `scheduling.run.ai/v2` types: every resource gets all three of
quota, limit and overQuotaWeight, because an omitted field is 0, and KAI reads a `limit`
of 0 as a cap of zero: GPU pods in such a queue stay Pending, even within the quota
(CPU-only pods still run). Nothing on the cluster says why.
"""

from __future__ import annotations

from typing import Any

from app.provisioning.backend import PoolQueue, ResourceQuota, TeamSpec

MANAGED_BY = "app.kubernetes.io/managed-by"
PORTAL = "gpu-portal"
TEAM_LABEL = "gpu-portal.io/team"
QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL = "scheduling.run.ai", "v2", "queues"
VCLUSTER_MANAGED = "vcluster.loft.sh/managed-by"
SCHEDULER = "kai-scheduler"


def owned_labels(team: str | None = None) -> dict[str, str]:
    labels = {MANAGED_BY: PORTAL}
    if team:
        labels[TEAM_LABEL] = team
    return labels


def _resource(quota: ResourceQuota) -> dict[str, float]:
    return {
        "quota": quota.quota,
        "limit": quota.limit,
        "overQuotaWeight": quota.over_quota_weight,
    }


def make_parent_queue(spec: TeamSpec) -> dict[str, Any]:
    return {
        "apiVersion": f"{QUEUE_GROUP}/{QUEUE_VERSION}",
        "kind": "Queue",
        "metadata": {"name": spec.parent_queue, "labels": owned_labels()},
        "spec": {
            "displayName": spec.parent_queue,
            "resources": {name: _resource(entry) for name, entry in spec.org_resources},
        },
    }


def make_queue(spec: TeamSpec) -> dict[str, Any]:
    return {
        "apiVersion": f"{QUEUE_GROUP}/{QUEUE_VERSION}",
        "kind": "Queue",
        "metadata": {"name": spec.queue_name, "labels": owned_labels(spec.team)},
        "spec": {
            "displayName": spec.team,
            "parentQueue": spec.parent_queue,
            "priority": spec.priority,
            "resources": {name: _resource(entry) for name, entry in spec.resources},
        },
    }


def make_pool_parent_queue(spec: TeamSpec, pool: PoolQueue) -> dict[str, Any]:
    """The org's queue in another pool: the pool's budget as its guarantee, labelled for
    the pool's scheduler shard."""
    body = make_parent_queue(spec)
    body["metadata"] = {
        "name": pool.parent_queue,
        "labels": {**owned_labels(), spec.pool_label: pool.label_value},
    }
    body["spec"]["displayName"] = pool.parent_queue
    body["spec"]["resources"] = {name: _resource(entry) for name, entry in pool.org_resources}
    return body


def make_pool_queue(spec: TeamSpec, pool: PoolQueue) -> dict[str, Any]:
    """The team's queue in another pool, under the org's queue there, labelled for the
    pool's scheduler shard."""
    body = make_queue(spec)
    body["metadata"] = {
        "name": pool.queue_name,
        "labels": {**owned_labels(spec.team), spec.pool_label: pool.label_value},
    }
    body["spec"]["parentQueue"] = pool.parent_queue
    body["spec"]["resources"] = {name: _resource(entry) for name, entry in pool.resources}
    return body


def make_namespace(spec: TeamSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": spec.namespace, "labels": owned_labels(spec.team)},
    }


def policy_name(spec: TeamSpec) -> str:
    return f"gpu-portal-queue-{spec.team}"


def make_policy(spec: TeamSpec) -> dict[str, Any]:
    """Pods synced from the team's vCluster must use KAI and the team's own queue."""
    queue = spec.queue_name
    label = spec.queue_label
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(spec), "labels": owned_labels(spec.team)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods"],
                    }
                ],
            },
            "validations": [
                {
                    "expression": f"object.spec.schedulerName == '{SCHEDULER}'",
                    "message": f"pods of team {spec.team} must set spec.schedulerName: {SCHEDULER}",
                    "reason": "Forbidden",
                },
                _queue_rule(spec)
                if spec.pools
                else {
                    "expression": (
                        "has(object.metadata.labels) && "
                        f"'{label}' in object.metadata.labels && "
                        f"object.metadata.labels['{label}'] == '{queue}'"
                    ),
                    "message": (f"pods of team {spec.team} must carry the label {label}: {queue}"),
                    "reason": "Forbidden",
                },
            ],
        },
    }


def _queue_rule(spec: TeamSpec) -> dict[str, Any]:
    """A team with queues in several pools: a pod names one of them, and the pool label
    that queue's shard reads (none for the default pool's queue). A pod whose queue and
    pool disagree would be seen by no scheduler that knows both, and wait forever
    without an event: it is refused here, saying which pairs are allowed."""
    label, key = spec.queue_label, spec.pool_label
    labels = "object.metadata.labels"
    pairs = [f"({labels}['{label}'] == '{spec.queue_name}' && !('{key}' in {labels}))"]
    allowed = [f"{label}: {spec.queue_name} without {key}"]
    for pool in spec.pools:
        pairs.append(
            f"({labels}['{label}'] == '{pool.queue_name}' && '{key}' in {labels} && "
            f"{labels}['{key}'] == '{pool.label_value}')"
        )
        allowed.append(f"{label}: {pool.queue_name} with {key}: {pool.label_value}")
    return {
        "expression": (
            f"has(object.metadata.labels) && '{label}' in {labels} && ({' || '.join(pairs)})"
        ),
        "message": f"pods of team {spec.team} must carry one of: " + "; or ".join(allowed),
        "reason": "Forbidden",
    }


# What the API server fills in on admission policies and bindings when left out
# (admissionregistration.k8s.io/v1 defaults): not a change made by someone.
_SERVER_DEFAULTS: dict[str, Any] = {
    "matchPolicy": "Equivalent",
    "namespaceSelector": {},
    "objectSelector": {},
    "scope": "*",
}


def spec_difference(wanted: Any, actual: Any, path: str = "spec") -> str | None:
    """Where ``actual`` differs from ``wanted`` (None when it does not), ignoring only
    fields the API server defaults to their default values; any other extra field counts."""
    if isinstance(wanted, dict) and isinstance(actual, dict):
        for key in sorted(set(wanted) | set(actual)):
            if key not in wanted:
                if key in _SERVER_DEFAULTS and actual[key] == _SERVER_DEFAULTS[key]:
                    continue
                return f"{path}.{key} added"
            if key not in actual:
                return f"{path}.{key} removed"
            found = spec_difference(wanted[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(wanted, list) and isinstance(actual, list):
        if len(wanted) != len(actual):
            return f"{path} has {len(actual)} entries, not {len(wanted)}"
        for n, (w, a) in enumerate(zip(wanted, actual, strict=True)):
            found = spec_difference(w, a, f"{path}[{n}]")
            if found:
                return found
        return None
    return None if wanted == actual else f"{path} differs"


def make_policy_binding(spec: TeamSpec) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy_name(spec), "labels": owned_labels(spec.team)},
        "spec": {
            "policyName": policy_name(spec),
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": spec.namespace}
                },
                # Only pods that vCluster synced; its own control-plane pod is left alone.
                "objectSelector": {
                    "matchExpressions": [{"key": VCLUSTER_MANAGED, "operator": "Exists"}]
                },
            },
        },
    }


def make_portal_binding(spec: TeamSpec, service_account: str, role: str) -> dict[str, Any]:
    """Gives the portal the namespaced permissions of its chart's team-namespace role
    (deploy/helm/gpu-portal/templates/rbac.yaml) in this namespace."""
    namespace, _, name = service_account.partition("/")
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": PORTAL,
            "namespace": spec.namespace,
            "labels": owned_labels(spec.team),
        },
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role,
        },
    }
