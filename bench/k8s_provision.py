"""Provisioning benchmark against a real kube-apiserver (the test suite's control plane).

Provisions N teams (KAI queue, namespace, the real vCluster chart 0.36.1 installed by the
real vcluster CLI or helm, admission policy) acting as the portal's ServiceAccount, with
tests/k8s/vcluster_runtime.py playing the nodes and the running vCluster. Prints the
time, the portal's API requests and writes per team and the CLI/helm time, then runs
reconcile passes over the ready teams and prints writes and requests per pass.

    .venv/bin/python bench/k8s_provision.py --teams 30 [--installer helm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kubernetes import client, config
from sqlalchemy import func, select, update

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.adapters.k8s.backend import KubernetesBackend  # noqa: E402
from app.cli import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import make_engine, make_session_factory, unit_of_work  # noqa: E402
from app.core.models import Org, Team, TeamStatus, User, utcnow  # noqa: E402
from app.provisioning.reconciler import Reconciler  # noqa: E402
from app.teams import service  # noqa: E402
from app.teams.rules import QuotaValues  # noqa: E402
from tests.k8s.conftest import install_portal_chart  # noqa: E402
from tests.k8s.control_plane import control_plane  # noqa: E402
from tests.k8s.vcluster_runtime import vcluster_runtime  # noqa: E402
from tests.servers import tool  # noqa: E402
from tests.shared import kai_crds, shared  # noqa: E402

WRITES = ("apply", "delete", "cli")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, default=30)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--installer", choices=("cli", "helm"), default="cli")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="k8s-bench-"))
    with control_plane() as plane:
        admin = config.new_client_from_config(str(plane.kubeconfig))
        for crd in kai_crds():
            client.ApiextensionsV1Api(admin).create_custom_resource_definition(crd)
        install_portal_chart(plane)
        time.sleep(1)
        token = (
            client.CoreV1Api(admin)
            .create_namespaced_service_account_token(
                "gpu-portal", "gpu-portal", {"spec": {"expirationSeconds": 86400}}
            )
            .status.token
        )
        kubeconfig = plane.kubeconfig_for("gpu-portal", token)
        os.environ["HOME"] = str(folder / "home")  # the CLI's config and helm's caches
        runtime = vcluster_runtime(admin, ready_seconds=0.2)
        runtime.__enter__()

        url = f"sqlite:///{folder / 'portal.db'}"
        settings = Settings(
            development=True,
            database_url=url,
            cluster_backend="kubernetes",
            kubeconfig=str(kubeconfig),
            kube_service_account="gpu-portal/gpu-portal",
            vcluster_cli=str(tool("vcluster")),
            helm_cli=str(tool("helm")),
            vcluster_installer=args.installer,
            vcluster_chart_repo=str(shared("third_party/vcluster/vcluster-0.36.1.tgz")),
            vcluster_chart_version="0.36.1",
            vcluster_expose="Ingress",
            worker_lease_seconds=120,
        )
        migrate(settings)
        engine = make_engine(url)
        factory = make_session_factory(engine)
        with unit_of_work(factory) as session:
            session.add(
                Org(
                    name="ml-org",
                    parent_queue="ml-org",
                    gpus_centi=args.teams * 100,
                    cpu_millicores=0,
                    memory_mb=0,
                )
            )
            admin_user = User(email="admin@example.org", display_name="admin", is_admin=True)
            lead = User(email="lead@example.org", display_name="lead")
            session.add_all([admin_user, lead])
            session.flush()
            for i in range(args.teams):
                request = service.submit_cluster_request(
                    session,
                    actor=lead,
                    name=f"t{i:03d}",
                    values=QuotaValues(gpu_quota_centi=50, gpu_limit_centi=100),
                )
                service.approve(session, actor=admin_user, request_id=request.id)
        backend = KubernetesBackend(settings)
        reconciler = Reconciler(factory, backend, settings, owner="bench")

        def not_ready() -> int:
            with factory() as session:
                return int(
                    session.scalar(
                        select(func.count())
                        .select_from(Team)
                        .where(Team.status != TeamStatus.READY)
                    )
                    or 0
                )

        started = time.perf_counter()
        while not_ready():
            with unit_of_work(factory) as session:
                session.execute(update(Team).values(next_attempt_at=utcnow()))
            reconciler.run_once()
        elapsed = time.perf_counter() - started
        calls = Counter(backend.calls)
        runs = list(backend.kube.cli_seconds)
        total = sum(calls.values())
        provision_writes = sum(calls[w] for w in WRITES)
        print(
            f"provisioned {args.teams} teams in {elapsed:.1f} s "
            f"({1000 * elapsed / args.teams:.0f} ms per team; the played pod is Ready 0.2 s "
            f"after its claim is bound)"
        )
        print(
            f"API requests while provisioning: {total} ({total / args.teams:.1f} per team), "
            f"writes {provision_writes} ({provision_writes / args.teams:.1f} per team): "
            + ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
        )
        print(
            f"{args.installer} runs: {len(runs)} ({len(runs) / args.teams:.1f} per team), "
            f"median {1000 * statistics.median(runs):.0f} ms, total {sum(runs):.1f} s "
            f"= {100 * sum(runs) / elapsed:.0f} % of the provisioning time"
        )

        per_pass: list[Counter[str]] = []
        durations = []
        for _ in range(args.passes):
            with unit_of_work(factory) as session:
                session.execute(update(Team).values(next_attempt_at=utcnow()))
            before = Counter(backend.calls)
            started = time.perf_counter()
            done = 0
            while True:
                handled = reconciler.run_once()
                done += handled
                if handled == 0:
                    break
            durations.append(time.perf_counter() - started)
            per_pass.append(Counter(backend.calls) - before)
        pass_writes = [sum(c[w] for w in WRITES) for c in per_pass]
        lists = [c["list"] for c in per_pass]
        requests = [sum(c.values()) for c in per_pass]
        print(f"steady reconcile passes over {args.teams} ready teams ({args.passes} passes):")
        print(f"  writes per pass: {pass_writes}")
        print(f"  list calls per pass: {lists}")
        print(
            f"  requests per pass: median {statistics.median(requests)}; last pass: "
            + ", ".join(f"{k} {v}" for k, v in sorted(per_pass[-1].items()))
        )
        print(f"  time per pass: median {1000 * statistics.median(durations):.0f} ms")
        ok = all(w == 0 for w in pass_writes) and len(set(lists)) == 1
        print(f"  [{'met' if ok else 'MISSED'}] zero writes and a constant number of list calls")
        engine.dispose()
        runtime.__exit__(None, None, None)


if __name__ == "__main__":
    main()
