"""Personal kubeconfigs against a real kube-apiserver (the test suite's control plane).

One API server plays both sides: the host, where secret vc-NAME holds the vCluster's
admin kubeconfig (a client certificate, as vCluster writes it), and the vCluster's API
server that kubeconfig points at. The portal's Kubernetes backend issues kubeconfigs for
``--people`` distinct people (each a first issue: ServiceAccount, ClusterRoleBinding and
TokenRequest) and again for the same people (a repeat: the TokenRequest only), then
revokes the whole team at once and waits until every token gets 401.

    .venv/bin/python bench/kubeconfig_issue.py --people 100
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.access.credentials import Person  # noqa: E402
from app.adapters.k8s.backend import KubernetesBackend  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.provisioning.backend import ResourceQuota, TeamSpec, each_resource  # noqa: E402
from tests.k8s.control_plane import ControlPlane, control_plane  # noqa: E402


def admin_secret(plane: ControlPlane, namespace: str, name: str) -> None:
    assert plane.admin_cert is not None
    assert plane.admin_key is not None
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "vc",
                "cluster": {
                    "server": plane.url,
                    "certificate-authority-data": b64(plane.serving_cert.read_text()),
                },
            }
        ],
        "users": [
            {
                "name": "vc",
                "user": {
                    "client-certificate-data": b64(plane.admin_cert.read_text()),
                    "client-key-data": b64(plane.admin_key.read_text()),
                },
            }
        ],
        "contexts": [{"name": "vc", "context": {"cluster": "vc", "user": "vc"}}],
        "current-context": "vc",
    }
    core: Any = client.CoreV1Api(config.new_client_from_config(str(plane.kubeconfig)))  # type: ignore[no-untyped-call]
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_secret(
        namespace,
        {"metadata": {"name": f"vc-{name}"}, "data": {"config": b64(yaml.safe_dump(kubeconfig))}},
    )


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def spec() -> TeamSpec:
    quota = ResourceQuota(1, 1, 1)
    return TeamSpec(
        team="nlp",
        namespace="vcluster-nlp",
        vcluster_name="nlp",
        queue_name="team-nlp",
        parent_queue="ml-org",
        priority=100,
        resources=each_resource(quota),
        org_resources=each_resource(quota),
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=100)
    args = parser.parse_args()
    with control_plane(controllers="clusterrole-aggregation", client_certificates=True) as plane:
        admin_secret(plane, "vcluster-nlp", "nlp")
        settings = Settings(
            development=True,
            database_url=f"sqlite:///{tempfile.mkdtemp()}/unused.db",
            cluster_backend="kubernetes",
            kubeconfig=str(plane.kubeconfig),
            vcluster_expose="Ingress",
            vcluster_api_address="secret",
        )
        backend = KubernetesBackend(settings)
        team = spec()
        people = [Person(i, f"person{i}@example.org", "member", "edit") for i in range(args.people)]
        first: list[float] = []
        repeat: list[float] = []
        tokens: list[dict[str, Any]] = []
        for person in people:
            started = time.perf_counter()
            issued = backend.issue_credential(team, person, ttl_seconds=3600)
            first.append(time.perf_counter() - started)
            tokens.append(yaml.safe_load(issued.kubeconfig.split("\n", 3)[3]))
        for person in people:
            started = time.perf_counter()
            backend.issue_credential(team, person, ttl_seconds=3600)
            repeat.append(time.perf_counter() - started)

        def works(loaded: dict[str, Any]) -> bool:
            loaded["clusters"][0]["cluster"]["server"] = plane.url
            api: Any = config.new_client_from_config_dict(loaded)  # type: ignore[no-untyped-call]
            try:
                client.CoreV1Api(api).list_namespaced_pod("default")
            except client.ApiException as exc:
                return bool(exc.status != 401)
            finally:
                api.close()
            return True

        # Each token used once: the API server now caches its successful check (~10 s),
        # the worst case for how soon a revocation bites.
        assert all(works(t) for t in tokens)
        started = time.perf_counter()
        names = [a.name for a in backend.credential_accounts(team)]
        backend.revoke_credentials(team, names)
        deleted = time.perf_counter() - started

        alive = list(tokens)
        while alive:
            alive = [t for t in alive if works(t)]
            if time.perf_counter() - started > 120:
                break
            if alive:
                time.sleep(0.5)
        all_401 = time.perf_counter() - started

    print(f"people: {args.people} (real kube-apiserver, portal's Kubernetes backend)")
    print(
        f"issue, first for a person: p50 {statistics.median(first) * 1000:.1f} ms, "
        f"p95 {percentile(first, 0.95) * 1000:.1f} ms"
    )
    print(
        f"issue, repeat:             p50 {statistics.median(repeat) * 1000:.1f} ms, "
        f"p95 {percentile(repeat, 0.95) * 1000:.1f} ms"
    )
    print(f"revoke all {len(names)} accounts: deleted in {deleted:.2f} s")
    print(
        f"every token answered 401 after {all_401:.1f} s"
        + ("" if not alive else f" ({len(alive)} still working!)")
    )
    target = "met" if statistics.median(first) < 0.3 else "MISSED"
    print(f"target issue p50 < 300 ms: {target}")
    print(f"target revoke 100 people < 10 s: {'met' if deleted < 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
