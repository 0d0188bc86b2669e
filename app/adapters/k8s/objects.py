"""Cluster-scoped objects and the team namespace: KAI queues, the host namespace with the
portal's role binding, and the queue-pinning admission policy."""

from __future__ import annotations

from typing import Any

from app.adapters.k8s import manifests as m
from app.adapters.k8s.client import APPLY, FIELD_MANAGER, Part, Snapshot
from app.provisioning.backend import DONE, MISSING, PROGRESSING, BackendError, Observation, TeamSpec


class ClusterObjects(Part):
    def _apply_queue(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._call(
            f"applying queue {name}",
            lambda: self.kube.custom.patch_cluster_custom_object(
                m.QUEUE_GROUP,
                m.QUEUE_VERSION,
                m.QUEUE_PLURAL,
                name,
                body,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=APPLY,
            ),
        )

    def _get_queue(self, name: str) -> dict[str, Any] | None:
        if self.kube.snapshot is not None:
            return self.kube.snapshot.queues.get(name)
        found = self._call(
            f"reading queue {name}",
            lambda: self.kube.custom.get_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL, name
            ),
            missing_ok=True,
        )
        return found if isinstance(found, dict) else None

    def begin_pass(self) -> None:
        """List every cluster-scoped kind once; observations in this pass read from that
        snapshot until a write invalidates it."""
        self.kube.snapshot = None
        queues: Any = self._call(
            "listing queues",
            lambda: self.kube.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        namespaces: Any = self._call(
            "listing namespaces",
            lambda: self.kube.core.list_namespace(label_selector=f"{m.MANAGED_BY}={m.PORTAL}"),
        )
        policies: Any = self._call(
            "listing policies", lambda: self.kube.admission.list_validating_admission_policy()
        )
        bindings: Any = self._call(
            "listing policy bindings",
            lambda: self.kube.admission.list_validating_admission_policy_binding(),
        )
        self.kube.snapshot = Snapshot(
            queues={q["metadata"]["name"]: q for q in (queues or {}).get("items", [])},
            namespaces={n.metadata.name: n for n in namespaces.items},
            policies={p.metadata.name: p for p in policies.items},
            bindings={b.metadata.name: b for b in bindings.items},
        )

    def end_pass(self) -> None:
        self.kube.snapshot = None

    # --- queues ---

    def observe_queue(self, spec: TeamSpec) -> Observation:
        """The team's queue in each pool it holds quota in, each under the org's queue of
        that pool, as approved; no queue of a pool the team has left."""
        for parent_body, queue_body in _wanted(spec):
            parent_name, name = parent_body["metadata"]["name"], queue_body["metadata"]["name"]
            parent = self._get_queue(parent_name)
            if parent is None:
                return Observation(MISSING, f"parent queue {parent_name} does not exist")
            if owned(parent) and _differs(parent, parent_body):
                return Observation(MISSING, f"parent queue {parent_name} differs from the pool")
            queue = self._get_queue(name)
            if queue is None:
                return Observation(MISSING, f"queue {name} does not exist")
            if not owned(queue):
                raise BackendError(foreign("queue", name))
            if _differs(queue, queue_body):
                return Observation(MISSING, f"queue {name} differs from the approved quota")
        gone = self._left_pools(spec)
        if gone:
            return Observation(MISSING, f"queue {gone[0]} is of a pool the team has left")
        where = ", ".join(p.queue_name for p in spec.pools)
        also = f" and {where} in their pools" if where else ""
        return Observation(DONE, f"queue {spec.queue_name} under {spec.parent_queue}{also}")

    def apply_queues(self, spec: TeamSpec) -> None:
        for parent_body, queue_body in _wanted(spec):
            parent = self._get_queue(parent_body["metadata"]["name"])
            if parent is None or owned(parent):
                self._apply_queue(parent_body)
            name = queue_body["metadata"]["name"]
            queue = self._get_queue(name)
            if queue is not None and not owned(queue):
                raise BackendError(foreign("queue", name))
            self._apply_queue(queue_body)
        left = self._left_pools(spec)
        parents = {
            (self._get_queue(name) or {}).get("spec", {}).get("parentQueue", "") for name in left
        }
        for name in left:
            self._delete_queue(name)
        for parent in sorted(p for p in parents if p):
            self._remove_parent_if_empty(parent)

    def _team_queues(self, spec: TeamSpec) -> list[dict[str, Any]]:
        """Every queue the portal made for the team, in any pool."""
        if self.kube.snapshot is not None:
            queues = list(self.kube.snapshot.queues.values())
        else:
            listed: Any = self._call(
                "listing queues",
                lambda: self.kube.custom.list_cluster_custom_object(
                    m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
                ),
            )
            queues = (listed or {}).get("items", [])
        return [
            q
            for q in queues
            if owned(q)
            and (q.get("metadata", {}).get("labels") or {}).get(m.TEAM_LABEL) == spec.team
        ]

    def _left_pools(self, spec: TeamSpec) -> list[str]:
        """The team's queues in pools it no longer holds quota in."""
        kept = {spec.queue_name, *(p.queue_name for p in spec.pools)}
        return sorted(
            q["metadata"]["name"]
            for q in self._team_queues(spec)
            if q["metadata"]["name"] not in kept
            and spec.pool_label in (q["metadata"].get("labels") or {})
        )

    def _delete_queue(self, name: str) -> None:
        self._call(
            f"deleting queue {name}",
            lambda: self.kube.custom.delete_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL, name
            ),
            missing_ok=True,
        )

    def remove_queue(self, spec: TeamSpec) -> Observation:
        queue = self._get_queue(spec.queue_name)
        if queue is not None:
            if not owned(queue):
                return Observation(DONE, f"queue {spec.queue_name} is not the portal's: left alone")
            self._delete_queue(spec.queue_name)
        pooled = [
            (q["metadata"]["name"], (q.get("spec") or {}).get("parentQueue", ""))
            for q in self._team_queues(spec)
            if q["metadata"]["name"] != spec.queue_name
        ]
        for name, _parent in pooled:
            self._delete_queue(name)
        for parent in {spec.parent_queue, *(parent for _name, parent in pooled if parent)}:
            self._remove_parent_if_empty(parent)
        return Observation(DONE, f"queue {spec.queue_name} deleted")

    def _remove_parent_if_empty(self, parent_name: str) -> None:
        """An org queue goes with its last child, and never before."""
        parent = self._get_queue(parent_name)
        if parent is None or not owned(parent):
            return
        listed: Any = self._call(
            "listing queues",
            lambda: self.kube.custom.list_cluster_custom_object(
                m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL
            ),
        )
        children = [
            q["metadata"]["name"]
            for q in (listed or {}).get("items", [])
            if q.get("spec", {}).get("parentQueue") == parent_name
        ]
        if not children:
            self._call(
                f"deleting parent queue {parent_name}",
                lambda: self.kube.custom.delete_cluster_custom_object(
                    m.QUEUE_GROUP, m.QUEUE_VERSION, m.QUEUE_PLURAL, parent_name
                ),
                missing_ok=True,
            )

    # --- namespace ---

    def _read_namespace(self, name: str) -> Any:
        if self.kube.snapshot is not None:
            return self.kube.snapshot.namespaces.get(name) or self._call(
                f"reading namespace {name}",
                lambda: self.kube.core.read_namespace(name),
                missing_ok=True,
            )
        return self._call(
            f"reading namespace {name}",
            lambda: self.kube.core.read_namespace(name),
            missing_ok=True,
        )

    def observe_namespace(self, spec: TeamSpec) -> Observation:
        ns = self._read_namespace(spec.namespace)
        if ns is None:
            return Observation(MISSING, f"namespace {spec.namespace} does not exist")
        labels = ns.metadata.labels or {}
        if labels.get(m.MANAGED_BY) != m.PORTAL:
            raise BackendError(foreign("namespace", spec.namespace))
        if ns.status and ns.status.phase == "Terminating":
            return Observation(PROGRESSING, f"namespace {spec.namespace} is still terminating")
        if self.settings.kube_service_account:
            return self.kube.deep(spec.team, "role binding", lambda: self._observe_binding(spec))
        return Observation(DONE, f"namespace {spec.namespace}")

    def _observe_binding(self, spec: TeamSpec) -> Observation:
        binding = self._call(
            f"reading the portal's role binding in {spec.namespace}",
            lambda: self.kube.rbac.read_namespaced_role_binding(m.PORTAL, spec.namespace),
            missing_ok=True,
        )
        if binding is None:
            return Observation(MISSING, f"the portal's role in {spec.namespace} is missing")
        return Observation(DONE, f"namespace {spec.namespace}")

    def apply_namespace(self, spec: TeamSpec) -> None:
        body = m.make_namespace(spec)
        self._call(
            f"applying namespace {spec.namespace}",
            lambda: self.kube.core.patch_namespace(
                spec.namespace, body, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY
            ),
        )
        account = self.settings.kube_service_account
        if account:
            binding = m.make_portal_binding(spec, account, self.settings.kube_team_role)
            self._call(
                f"granting the portal its role in {spec.namespace}",
                lambda: self.kube.rbac.patch_namespaced_role_binding(
                    m.PORTAL,
                    spec.namespace,
                    binding,
                    field_manager=FIELD_MANAGER,
                    force=True,
                    _content_type=APPLY,
                ),
            )

    def remove_namespace(self, spec: TeamSpec) -> Observation:
        ns: Any = self._call(
            f"reading namespace {spec.namespace}",
            lambda: self.kube.core.read_namespace(spec.namespace),
            missing_ok=True,
        )
        if ns is None:
            return Observation(DONE, f"namespace {spec.namespace} deleted")
        if (ns.metadata.labels or {}).get(m.MANAGED_BY) != m.PORTAL:
            return Observation(DONE, f"namespace {spec.namespace} is not the portal's: left alone")
        if not ns.metadata.deletion_timestamp:
            self._call(
                f"deleting namespace {spec.namespace}",
                lambda: self.kube.core.delete_namespace(spec.namespace),
                missing_ok=True,
            )
        return Observation(PROGRESSING, f"namespace {spec.namespace} is being deleted")

    # --- admission policy ---

    def observe_policy(self, spec: TeamSpec) -> Observation:
        name = m.policy_name(spec)
        policy: Any
        binding: Any
        if self.kube.snapshot is not None:
            policy = self.kube.snapshot.policies.get(name)
            binding = self.kube.snapshot.bindings.get(name)
        else:
            policy = self._call(
                f"reading policy {name}",
                lambda: self.kube.admission.read_validating_admission_policy(name),
                missing_ok=True,
            )
            binding = self._call(
                f"reading policy binding {name}",
                lambda: self.kube.admission.read_validating_admission_policy_binding(name),
                missing_ok=True,
            )
        if policy is None or binding is None:
            return Observation(MISSING, f"admission policy {name} does not exist")
        # The whole spec, not just that the objects exist: a hand-edited selector, match
        # condition or expression could let the team's pods escape queue pinning.
        actual: dict[str, Any] = self.kube.api.sanitize_for_serialization(policy.spec)
        changed = m.spec_difference(m.make_policy(spec)["spec"], actual)
        if changed:
            return Observation(MISSING, f"admission policy {name} was changed ({changed})")
        bound: dict[str, Any] = self.kube.api.sanitize_for_serialization(binding.spec)
        changed = m.spec_difference(m.make_policy_binding(spec)["spec"], bound)
        if changed:
            return Observation(MISSING, f"admission policy binding {name} was changed ({changed})")
        return Observation(DONE, f"pods in {spec.namespace} are pinned to {spec.queue_name}")

    def apply_policy(self, spec: TeamSpec) -> None:
        name = m.policy_name(spec)
        policy, binding = m.make_policy(spec), m.make_policy_binding(spec)
        admission = self.kube.admission
        applied_policy: Any = self._call(
            f"applying policy {name}",
            lambda: admission.patch_validating_admission_policy(
                name, policy, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY
            ),
        )
        applied_binding: Any = self._call(
            f"applying policy binding {name}",
            lambda: admission.patch_validating_admission_policy_binding(
                name, binding, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY
            ),
        )
        # Server-side apply keeps fields another manager added (say, a matchConditions
        # that skips every pod): when any is left, replace the whole object.
        if m.spec_difference(policy["spec"], self._plain(applied_policy.spec)):
            body: Any = {
                **policy,
                "metadata": {
                    **policy["metadata"],
                    "resourceVersion": applied_policy.metadata.resource_version,
                },
            }
            self._call(
                f"replacing policy {name}",
                lambda: admission.replace_validating_admission_policy(
                    name, body, field_manager=FIELD_MANAGER
                ),
            )
        if m.spec_difference(binding["spec"], self._plain(applied_binding.spec)):
            body_b: Any = {
                **binding,
                "metadata": {
                    **binding["metadata"],
                    "resourceVersion": applied_binding.metadata.resource_version,
                },
            }
            self._call(
                f"replacing policy binding {name}",
                lambda: admission.replace_validating_admission_policy_binding(
                    name, body_b, field_manager=FIELD_MANAGER
                ),
            )

    def _plain(self, obj: Any) -> dict[str, Any]:
        plain: dict[str, Any] = self.kube.api.sanitize_for_serialization(obj)
        return plain

    def remove_policy(self, spec: TeamSpec) -> Observation:
        name = m.policy_name(spec)
        self._call(
            f"deleting policy binding {name}",
            lambda: self.kube.admission.delete_validating_admission_policy_binding(name),
            missing_ok=True,
        )
        self._call(
            f"deleting policy {name}",
            lambda: self.kube.admission.delete_validating_admission_policy(name),
            missing_ok=True,
        )
        return Observation(DONE, f"admission policy {name} deleted")


def owned(obj: dict[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return bool(labels.get(m.MANAGED_BY) == m.PORTAL)


def foreign(kind: str, name: str) -> str:
    return (
        f"a {kind} named {name} already exists and is not managed by the portal; "
        "the portal never changes it: rename the team or remove that object"
    )


def _wanted(spec: TeamSpec) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the org's queue, the team's queue) in the default pool and each other pool."""
    return [
        (m.make_parent_queue(spec), m.make_queue(spec)),
        *((m.make_pool_parent_queue(spec, p), m.make_pool_queue(spec, p)) for p in spec.pools),
    ]


def _differs(found: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """The queue's spec differs, or its pool label (a queue without it is the default
    shard's, whatever its name)."""
    if found.get("spec") != wanted["spec"]:
        return True
    labels = found.get("metadata", {}).get("labels") or {}
    return any(labels.get(k) != v for k, v in wanted["metadata"]["labels"].items())
