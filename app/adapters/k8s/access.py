"""Personal credentials inside a team's vCluster.

The portal talks to the vCluster's own API server with the admin kubeconfig from secret
``vc-NAME`` (read from the host, never handed out). For each person it keeps a
ServiceAccount in a portal-owned namespace, bound to the person's ClusterRole, and issues
short-lived tokens for it with the TokenRequest API. Deleting the ServiceAccount makes
every token issued for it fail authentication: that is how a kubeconfig is revoked.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from urllib3.exceptions import HTTPError as Urllib3Error

from app.access import kubeconfigs as files
from app.access.credentials import Account, IssuedCredential, Person
from app.adapters.k8s import manifests as m
from app.adapters.k8s.client import Part, api_message
from app.adapters.k8s.kubeconfig import Kubeconfigs
from app.provisioning.backend import (
    BackendError,
    RefusedPod,
    TeamSpec,
    TemplateCheck,
    template_objects,
)

T = TypeVar("T")
MANAGED = {"app.kubernetes.io/managed-by": "gpu-portal"}
SELECTOR = "app.kubernetes.io/managed-by=gpu-portal"
ROLE_ANNOTATION = "gpu-portal/cluster-role"
EMAIL_ANNOTATION = "gpu-portal/email"
TIMEOUT = 10  # seconds for each call to a vCluster's API server
EVENTS_READ = 500  # the newest sync errors read per vCluster
PENDING_PAGE = 500  # Pending pods read a page
PENDING_READ = 2000  # Pending pods compared at most (the rest are not looked at)
# Who reports the pod syncer's events (vCluster's syncer: its name + "-syncer", through
# client-go's events API, which writes it as the event's reportingComponent).
SYNCER_COMPONENT = "pod-syncer"
MESSAGE_SHOWN = 600  # characters of a host's answer kept
# Where the syncer records, on a host pod, which pod inside the vCluster it copies.
OBJECT_NAME = "vcluster.loft.sh/object-name"
OBJECT_NAMESPACE = "vcluster.loft.sh/object-namespace"


@dataclass
class _Connection:
    """A client for one vCluster, valid while its admin secret does not change."""

    version: str
    address: str
    ca_data: str | None
    api: client.ApiClient
    core: Any  # client.CoreV1Api, called with plain dicts
    rbac: Any  # client.RbacAuthorizationV1Api
    ready: set[tuple[str, str]] = field(default_factory=set)  # (account, role) made
    dynamic: Any = None  # a DynamicClient, made on first use (its discovery is kept)


class Access(Part):
    def __init__(self, kube: Any, kubeconfigs: Kubeconfigs) -> None:
        super().__init__(kube)
        self.kubeconfigs = kubeconfigs
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()

    # --- the connection --------------------------------------------------------------

    def _address(self, spec: TeamSpec, raw: dict[str, Any]) -> str:
        mode = self.settings.vcluster.api_address
        if mode == "secret":
            return str(_cluster(raw).get("server") or "")
        if mode == "exposed":
            return self.kubeconfigs.user_server(spec)
        return f"https://{spec.vcluster_name}.{spec.namespace}.svc:443"

    def _connect(self, spec: TeamSpec) -> _Connection:
        raw, version = self.kubeconfigs.admin_config(spec)
        with self._lock:
            known = self._connections.get(spec.team)
            if known is not None and known.version == version:
                return known
        address = self._address(spec, raw)
        cluster = {**_cluster(raw), "server": address}
        user = ((raw.get("users") or [{}])[0] or {}).get("user", {})
        admin = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "vcluster", "cluster": cluster}],
            "users": [{"name": "portal", "user": user}],
            "contexts": [{"name": "portal", "context": {"cluster": "vcluster", "user": "portal"}}],
            "current-context": "portal",
        }
        try:
            api = config.new_client_from_config_dict(admin)
        except Exception as exc:  # a malformed secret: say which, never what it holds
            raise BackendError(
                f"secret vc-{spec.vcluster_name} holds a kubeconfig the portal cannot use "
                f"({type(exc).__name__})"
            ) from None
        connection = _Connection(
            version,
            address,
            cluster.get("certificate-authority-data"),
            api,
            client.CoreV1Api(api),
            client.RbacAuthorizationV1Api(api),
        )
        with self._lock:
            old = self._connections.get(spec.team)
            self._connections[spec.team] = connection
        if old is not None:
            old.api.close()
        return connection

    def _in(
        self, spec: TeamSpec, what: str, fn: Callable[[], T], *, ok: tuple[int, ...] = ()
    ) -> T | None:
        """One call to the team's vCluster; statuses in ``ok`` return None."""
        self.kube.requests += 1
        self.kube.calls["vcluster"] += 1
        try:
            return fn()
        except ApiException as exc:
            if exc.status in ok:
                return None
            raise BackendError(
                f"{what} in the vCluster of {spec.team}: {api_message(exc)}"
            ) from None
        except (Urllib3Error, OSError) as exc:
            raise BackendError(
                f"{what}: the vCluster of {spec.team} could not be reached ({type(exc).__name__})"
            ) from None

    # --- issuing ----------------------------------------------------------------------

    def issue(self, spec: TeamSpec, person: Person, *, ttl_seconds: int) -> IssuedCredential:
        conn = self._connect(spec)
        key = (person.account, person.cluster_role)
        if key not in conn.ready:
            self._ensure(spec, conn, person)
            conn.ready.add(key)
        response = self._token(spec, conn, person, ttl_seconds)
        if response is None:  # the account went away since (revoked elsewhere): make it again
            conn.ready.discard(key)
            self._ensure(spec, conn, person)
            conn.ready.add(key)
            response = self._token(spec, conn, person, ttl_seconds)
        if response is None or not response.status or not response.status.token:
            raise BackendError(f"the vCluster of {spec.team} issued no token")
        token = response.status.token
        expires_at = response.status.expiration_timestamp or (
            datetime.now(UTC) + timedelta(seconds=ttl_seconds)
        )
        text = files.token_kubeconfig(
            team=spec.team,
            person=person,
            server=self.kubeconfigs.user_server(spec),
            ca_data=conn.ca_data,
            token=token,
            expires_at=expires_at,
        )
        return IssuedCredential(text, expires_at, files.token_id(token))

    def _token(self, spec: TeamSpec, conn: _Connection, person: Person, ttl: int) -> Any:
        body = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=ttl)
        )
        return self._in(
            spec,
            "issuing a token",
            lambda: conn.core.create_namespaced_service_account_token(
                person.account, self.settings.kubeconfigs.namespace, body, _request_timeout=TIMEOUT
            ),
            ok=(404,),
        )

    def _ensure(self, spec: TeamSpec, conn: _Connection, person: Person) -> None:
        namespace = self.settings.kubeconfigs.namespace
        self._in(
            spec,
            f"creating namespace {namespace}",
            lambda: conn.core.create_namespace(
                {"metadata": {"name": namespace, "labels": MANAGED}}, _request_timeout=TIMEOUT
            ),
            ok=(409,),
        )
        account = self._in(
            spec,
            f"reading service account {person.account}",
            lambda: conn.core.read_namespaced_service_account(
                person.account, namespace, _request_timeout=TIMEOUT
            ),
            ok=(404,),
        )
        annotations = (account.metadata.annotations or {}) if account is not None else {}
        if account is not None and annotations.get(ROLE_ANNOTATION) != person.cluster_role:
            # Another role than the person has now: its tokens must stop working.
            self._delete(spec, conn, [person.account])
            account = None
        if account is None:
            self._in(
                spec,
                f"creating service account {person.account}",
                lambda: conn.core.create_namespaced_service_account(
                    namespace,
                    {
                        "metadata": {
                            "name": person.account,
                            "labels": {**MANAGED, "gpu-portal/user-id": str(person.user_id)},
                            "annotations": {
                                ROLE_ANNOTATION: person.cluster_role,
                                EMAIL_ANNOTATION: person.email,
                            },
                        }
                    },
                    _request_timeout=TIMEOUT,
                ),
                ok=(409,),
            )
        binding = {
            "metadata": {"name": _binding(person.account), "labels": MANAGED},
            "subjects": [
                {"kind": "ServiceAccount", "name": person.account, "namespace": namespace}
            ],
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": person.cluster_role,
            },
        }
        existing = self._in(
            spec,
            "reading the person's role binding",
            lambda: conn.rbac.read_cluster_role_binding(
                _binding(person.account), _request_timeout=TIMEOUT
            ),
            ok=(404,),
        )
        if existing is not None and existing.role_ref.name != person.cluster_role:
            self._in(
                spec,
                "replacing the person's role binding",
                lambda: conn.rbac.delete_cluster_role_binding(
                    _binding(person.account), _request_timeout=TIMEOUT
                ),
                ok=(404,),
            )
            existing = None
        if existing is None:
            self._in(
                spec,
                "binding the person's role",
                lambda: conn.rbac.create_cluster_role_binding(binding, _request_timeout=TIMEOUT),
                ok=(409,),
            )

    # --- listing and revoking -----------------------------------------------------------

    def accounts(self, spec: TeamSpec) -> list[Account]:
        conn = self._connect(spec)
        listed = self._in(
            spec,
            "listing the portal's service accounts",
            lambda: conn.core.list_namespaced_service_account(
                self.settings.kubeconfigs.namespace,
                label_selector=SELECTOR,
                _request_timeout=TIMEOUT,
            ),
        )
        result = []
        items: list[Any] = listed.items if listed is not None else []
        for item in items:
            meta = item.metadata
            result.append(
                Account(
                    meta.name,
                    (meta.annotations or {}).get(ROLE_ANNOTATION, ""),
                    meta.creation_timestamp or datetime.now(UTC),
                    meta.uid or "",
                )
            )
        return result

    # --- what the host refused ---------------------------------------------------------

    def check_template(self, spec: TeamSpec, *, repair: bool) -> TemplateCheck:
        """Each object of the template's manifests read inside the vCluster (as its
        admin), each chart's helm release looked for; with ``repair``, a missing object
        created again from the manifest (the syncer applies manifests only when they
        change, so a deleted one would stay gone)."""
        conn = self._connect(spec)
        if conn.dynamic is None:
            conn.dynamic = self._in(
                spec, "reading its API's kinds", lambda: DynamicClient(conn.api)
            )
        dynamic: DynamicClient = conn.dynamic
        missing: list[str] = []
        repaired: list[str] = []
        for doc in template_objects(spec.template_manifests):
            meta = doc["metadata"]
            what = f"{doc['kind']} {meta['name']}"
            try:
                kind = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            except ResourceNotFoundError:
                missing.append(f"{what} (its kind is not served)")
                continue
            namespace = (meta.get("namespace") or "default") if kind.namespaced else None
            seen = self._in(
                spec,
                f"reading {what}",
                functools.partial(kind.get, name=meta.get("name"), namespace=namespace),
                ok=(404,),
            )
            if seen is not None:
                continue
            missing.append(what)
            if repair:
                self._in(
                    spec,
                    f"creating {what} again",
                    functools.partial(kind.create, body=doc, namespace=namespace),
                )
                repaired.append(what)
        for release, namespace in spec.template_charts:
            secrets = self._in(
                spec,
                f"looking for chart {release}",
                functools.partial(
                    conn.core.list_namespaced_secret,
                    namespace,
                    label_selector=f"owner=helm,name={release}",
                    _request_timeout=TIMEOUT,
                ),
            )
            if secrets is None or not secrets.items:
                missing.append(f"chart {release} (in {namespace})")
        return TemplateCheck(tuple(missing), tuple(repaired))

    def refused_pods(self, spec: TeamSpec) -> list[RefusedPod]:
        """Pods inside the vCluster that the host refused. The syncer records each refusal
        as a Warning event ``SyncError`` on the pod, inside the vCluster, and keeps
        trying; a pod counts while it still exists there, Pending, with no copy on the
        host (a later fix of the host's policy lets it through). Everything inside the
        vCluster is the team's to write: the reads are bounded (the newest
        ``EVENTS_READ`` events, Pending pods in pages up to ``PENDING_READ``) and read as
        plain JSON, and an event the syncer did not report is labelled as such."""
        conn = self._connect(spec)
        events = self._raw(
            spec,
            "listing sync errors",
            lambda: conn.core.list_event_for_all_namespaces(
                field_selector="reason=SyncError,involvedObject.kind=Pod",
                limit=EVENTS_READ,
                _request_timeout=TIMEOUT,
                _preload_content=False,
            ),
        )
        answers = latest_answers(events.get("items") or [])
        if not answers:
            return []
        pending: dict[tuple[str, str], str] = {}
        more, read = "", 0
        while read < PENDING_READ:
            page = self._raw(
                spec,
                "listing pending pods",
                functools.partial(
                    conn.core.list_pod_for_all_namespaces,
                    field_selector="status.phase=Pending",
                    limit=PENDING_PAGE,
                    _continue=more or None,
                    _request_timeout=TIMEOUT,
                    _preload_content=False,
                ),
            )
            pods = page.get("items") or []
            read += len(pods)
            for pod in pods:
                meta = pod.get("metadata") or {}
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if key in answers:
                    pending[key] = str(meta.get("uid") or "")
            more = str((page.get("metadata") or {}).get("continue") or "")
            if not more or not pods:
                break
        synced = self._call(
            f"listing the synced pods in {spec.namespace}",
            lambda: self.kube.core.list_namespaced_pod(
                spec.namespace, label_selector=f"{m.VCLUSTER_MANAGED}={spec.vcluster_name}"
            ),
        )
        on_host = set()
        host_pods: list[Any] = synced.items if synced is not None else []
        for pod in host_pods:
            notes = pod.metadata.annotations or {}
            on_host.add((notes.get(OBJECT_NAMESPACE, ""), notes.get(OBJECT_NAME, "")))
        refused = [
            answer
            for key, (uid, answer) in answers.items()
            if pending.get(key) == uid and key not in on_host
        ]
        return sorted(refused, key=lambda r: r.last_seen, reverse=True)

    def _raw(self, spec: TeamSpec, what: str, fn: Callable[[], Any]) -> dict[str, Any]:
        """A list call's answer as plain JSON (the client's models cost a hundred times
        the parse for objects the team writes)."""
        response = self._in(spec, what, fn)
        if response is None:
            return {}
        try:
            body = json.loads(response.data)
        except ValueError:
            raise BackendError(f"{what} in the vCluster of {spec.team}: not JSON") from None
        return body if isinstance(body, dict) else {}

    def revoke(
        self, spec: TeamSpec, accounts: Collection[str], *, uids: Mapping[str, str] | None = None
    ) -> None:
        if accounts:
            self._delete(spec, self._connect(spec), list(accounts), uids or {})

    def _delete(
        self,
        spec: TeamSpec,
        conn: _Connection,
        accounts: list[str],
        uids: Mapping[str, str] | None = None,
    ) -> None:
        namespace = self.settings.kubeconfigs.namespace
        for name in accounts:
            uid = (uids or {}).get(name)
            options = client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=uid) if uid else None
            )
            deleted = self._in(
                spec,
                f"deleting service account {name}",
                lambda name=name, options=options: conn.core.delete_namespaced_service_account(  # type: ignore[misc]
                    name, namespace, body=options, _request_timeout=TIMEOUT
                ),
                ok=(404, 409),
            )
            if deleted is None and uid:
                continue  # made again since it was listed (409) or already gone (404)
            self._in(
                spec,
                f"deleting the role binding of {name}",
                lambda name=name: conn.rbac.delete_cluster_role_binding(  # type: ignore[misc]
                    _binding(name), _request_timeout=TIMEOUT
                ),
                ok=(404,),
            )
            conn.ready = {key for key in conn.ready if key[0] != name}

    # --- sign-in through the identity provider -----------------------------------------

    def oidc_kubeconfig(
        self, spec: TeamSpec, person: Person, *, issuer: str, client_id: str
    ) -> str:
        raw, _version = self.kubeconfigs.admin_config(spec)
        return files.oidc_kubeconfig(
            team=spec.team,
            person=person,
            server=self.kubeconfigs.user_server(spec),
            ca_data=_cluster(raw).get("certificate-authority-data"),
            issuer=issuer,
            client_id=client_id,
        )

    def forget(self, team: str) -> None:
        with self._lock:
            old = self._connections.pop(team, None)
        if old is not None:
            old.api.close()


def _seen(event: Mapping[str, Any]) -> datetime:
    """When an event (plain JSON) last happened."""
    for when in (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        if isinstance(when, str):
            try:
                return datetime.fromisoformat(when.replace("Z", "+00:00"))
            except ValueError:
                continue
    return datetime.now(UTC)


def latest_answers(events: list[Any]) -> dict[tuple[str, str], tuple[str, RefusedPod]]:
    """Per pod (namespace, name): its uid and the newest sync error, the syncer's own over
    any other (a team's cluster-admin can write events too: those are labelled)."""
    latest: dict[tuple[str, str], tuple[bool, datetime, Mapping[str, Any]]] = {}
    for event in events:
        if not isinstance(event, Mapping):
            continue
        obj = event.get("involvedObject")
        if not isinstance(obj, Mapping):
            continue
        key = (str(obj.get("namespace") or ""), str(obj.get("name") or ""))
        by_syncer = event.get("reportingComponent") == SYNCER_COMPONENT
        rank = (by_syncer, _seen(event))
        if key not in latest or rank >= latest[key][:2]:
            latest[key] = (*rank, event)
    answers: dict[tuple[str, str], tuple[str, RefusedPod]] = {}
    for key, (by_syncer, seen, event) in latest.items():
        count = event.get("count")
        answers[key] = (
            str(event["involvedObject"].get("uid") or ""),
            RefusedPod(
                namespace=key[0],
                name=key[1],
                message=str(event.get("message") or "")[:MESSAGE_SHOWN],
                last_seen=seen,
                count=count if isinstance(count, int) and count > 0 else 1,
                by_syncer=by_syncer,
            ),
        )
    return answers


def _cluster(raw: dict[str, Any]) -> dict[str, Any]:
    cluster = ((raw.get("clusters") or [{}])[0] or {}).get("cluster", {})
    return dict(cluster) if isinstance(cluster, dict) else {}


def _binding(account: str) -> str:
    return f"gpu-portal:{account}"
