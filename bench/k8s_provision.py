"""Provisioning benchmark against a real kube-apiserver (the test suite's control plane).

Two measurements, both acting as the portal's ServiceAccount with the real vCluster chart
0.36.1 and the real syncer running each vCluster (tests/k8s/vcluster_runtime.py plays
the nodes and the load balancer):

1. Provisioning N teams (KAI queue, namespace, the chart installed by the real vcluster
   CLI or helm, admission policy): the time, the portal's API requests and writes per
   team and the CLI/helm time, then reconcile passes over the ready teams with writes
   and requests per pass. Each syncer is stopped once its team is ready (one costs about
   600 MiB), so N is not bounded by memory.
2. From approval to a team's first pod bound by KAI (KAI Scheduler v0.17.0 running as
   in tests/k8s/kai.py, one GPU as in the design source): for each of the design
   source's three teams, the admin approves, the portal provisions, the lead downloads a
   personal kubeconfig and creates the team page's GPU-fraction pod inside the
   vCluster, and the clock stops when KAI's binder has bound it on the host. Printed
   per team, split into approval → ready and ready → bound, with the median.

    .venv/bin/python bench/k8s_provision.py --teams 6 [--installer helm] [--skip-first-pod]
        [--skip-provision]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client, config
from sqlalchemy import func, select, update

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.adapters.k8s.backend import KubernetesBackend  # noqa: E402
from app.cli import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import make_engine, make_session_factory, unit_of_work  # noqa: E402
from app.core.models import Org, Team, TeamSchedule, TeamStatus, User, utcnow  # noqa: E402
from app.core.quota import Quota  # noqa: E402
from app.provisioning.reconciler import Reconciler  # noqa: E402
from app.teams import service  # noqa: E402
from tests.k8s.conftest import portal_identity  # noqa: E402
from tests.k8s.control_plane import control_plane  # noqa: E402
from tests.k8s.vcluster_runtime import vcluster_runtime  # noqa: E402
from tests.servers import tool  # noqa: E402
from tests.shared import kai_crds, shared  # noqa: E402

WRITES = ("apply", "delete", "cli")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, default=6)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--installer", choices=("cli", "helm"), default="cli")
    parser.add_argument("--skip-first-pod", action="store_true")
    parser.add_argument("--skip-provision", action="store_true")
    args = parser.parse_args()
    if not args.skip_provision:
        provision(args)
    if not args.skip_first_pod:
        first_pod()


def provision(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="k8s-bench-"))
    with control_plane() as plane:
        admin = config.new_client_from_config(str(plane.kubeconfig))
        for crd in kai_crds():
            client.ApiextensionsV1Api(admin).create_custom_resource_definition(crd)
        kubeconfig = portal_identity(plane)
        os.environ["HOME"] = str(folder / "home")  # the CLI's config and helm's caches
        runtime = vcluster_runtime(plane, admin, ready_seconds=0.2, retire_ready=True)
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
            vcluster_expose="LoadBalancer",
            vcluster_api_address="service",
            vcluster_timeout_seconds=300,
            worker_lease_seconds=300,
        )
        migrate(settings)
        engine = make_engine(url)
        factory = make_session_factory(engine)
        with unit_of_work(factory) as session:
            session.add(Org.with_pool("ml-org", {"gpu": args.teams * 100}))
            admin_user = User(email="admin@example.org", display_name="admin", is_admin=True)
            lead = User(email="lead@example.org", display_name="lead")
            session.add_all([admin_user, lead])
            session.flush()
            for i in range(args.teams):
                request = service.submit_cluster_request(
                    session,
                    actor=lead,
                    name=f"t{i:03d}",
                    values=Quota.of_gpu(50, 100),
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
                session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
            reconciler.run_once()
        elapsed = time.perf_counter() - started
        calls = Counter(backend.calls)
        runs = list(backend.kube.cli_seconds)
        total = sum(calls.values())
        provision_writes = sum(calls[w] for w in WRITES)
        print(
            f"provisioned {args.teams} teams in {elapsed:.1f} s "
            f"({1000 * elapsed / args.teams:.0f} ms per team; each pod Ready when its real "
            f"syncer serves)"
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
                session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
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


def first_pod() -> None:
    """Approval → the team's first pod bound by KAI, for the design source's teams."""
    import shutil

    import yaml
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.runtime import portal_of
    from app.teams.seed import EXAMPLE_TEAMS
    from tests.conftest import settings_for
    from tests.k8s import kai
    from tests.web.conftest import client_for

    folder = Path(tempfile.mkdtemp(prefix="k8s-bench-pod-"))
    os.environ["HOME"] = str(folder / "home")
    with control_plane() as plane:
        admin_api = config.new_client_from_config(str(plane.kubeconfig))
        kai.install(admin_api)
        kubeconfig = portal_identity(plane)
        with (
            kai.kai_scheduler(plane),
            kai.gpu_nodes(admin_api) as nodes,
            vcluster_runtime(plane, admin_api, ready_seconds=0.2) as runtime,
        ):
            nodes.add("gpu-node-1", 1)
            url = f"sqlite:///{folder / 'portal.db'}"
            settings = settings_for(
                url,
                cluster_backend="kubernetes",
                kubeconfig=str(kubeconfig),
                kube_service_account="gpu-portal/gpu-portal",
                vcluster_expose="LoadBalancer",
                vcluster_api_address="service",
                vcluster_timeout_seconds=300.0,
                vcluster_cli=str(tool("vcluster")),
                helm_cli=str(tool("helm")),
                vcluster_chart_repo=str(shared("third_party/vcluster/vcluster-0.36.1.tgz")),
                vcluster_chart_version="0.36.1",
            )
            migrate(settings)
            app = create_app(settings)
            core = client.CoreV1Api(admin_api)
            with TestClient(app):
                factory = portal_of(app).session_factory
                with unit_of_work(factory) as session:
                    session.add(
                        Org.with_pool("ml-org", {"gpu": 100, "cpu": 40_000, "memory": 160_000})
                    )
                    session.add(
                        User(email="admin@example.org", display_name="admin", is_admin=True)
                    )
                admin = client_for(app, "admin@example.org", admin=True)
                leads = {t: client_for(app, f"lead-{t}@example.org") for t, *_ in EXAMPLE_TEAMS}
                requested = {}
                for team, lead in leads.items():
                    body = {"name": team, "gpu_quota": "0.33", "gpu_limit": "1"}
                    requested[team] = lead.api("POST", "/api/v1/requests", body).json()
                timings: dict[str, tuple[float, float]] = {}
                splits: list[dict[str, float]] = []
                for team, lead in leads.items():
                    request_id = requested[team]["id"]
                    team_id = requested[team]["team_id"]
                    watch = Milestones(admin_api, runtime, team)
                    started = time.monotonic()
                    admin.api("POST", f"/api/v1/requests/{request_id}/approve", {})
                    while lead.get(f"/api/v1/teams/{team_id}").json()["status"] != "ready":
                        with unit_of_work(factory) as session:
                            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
                        portal_of(app).reconciler.run_once()
                        time.sleep(0.1)
                    ready = time.monotonic()
                    splits.append(watch.split(started, ready))
                    print(f"{team}: " + ", ".join(f"{k} {v:.1f} s" for k, v in splits[-1].items()))
                    answer = lead.api("POST", f"/api/v1/teams/{team_id}/kubeconfig?ttl=1h")
                    inside = config.new_client_from_config_dict(yaml.safe_load(answer.text))
                    pod = _offered_pod(lead, team_id)
                    client.CoreV1Api(inside).create_namespaced_pod("default", pod)
                    name = pod["metadata"]["name"]
                    while True:
                        pods = core.list_namespaced_pod(f"vcluster-{team}").items
                        if any(
                            (p.metadata.annotations or {}).get("vcluster.loft.sh/object-name")
                            == name
                            and p.spec.node_name
                            for p in pods
                        ):
                            break
                        if time.monotonic() - ready > 300:
                            raise SystemExit(f"{team}'s pod was not bound in 300 s")
                        time.sleep(0.1)
                    bound = time.monotonic()
                    timings[team] = (ready - started, bound - ready)
                    print(
                        f"{team}: approval → ready {ready - started:.1f} s, "
                        f"ready → pod bound by KAI {bound - ready:.1f} s, "
                        f"approval → bound {bound - started:.1f} s"
                    )
                totals = [a + b for a, b in timings.values()]
                to_ready = statistics.median(a for a, _ in timings.values())
                to_bound = statistics.median(b for _, b in timings.values())
                first_starts = [_syncer_start(runtime, core, t) for t in leads]
                print(
                    f"approval → first pod bound by KAI: median {statistics.median(totals):.1f} s "
                    f"(approval → ready median {to_ready:.1f} s, ready → bound median "
                    f"{to_bound:.1f} s) over {len(totals)} teams, one at a time; the syncer's "
                    f"own start (process started → serving) median "
                    f"{statistics.median(first_starts):.1f} s"
                )
                print(
                    "approval → ready, medians by part: "
                    + ", ".join(
                        f"{k} {statistics.median(s[k] for s in splits):.1f} s" for k in splits[0]
                    )
                )
                own = statistics.median(
                    sum(v for k, v in split.items() if k.startswith("portal:")) for split in splits
                )
                syncer = statistics.median(first_starts)
                print(
                    f"approval → ready: median {to_ready:.1f} s against the syncer's own start "
                    f"{syncer:.1f} s: {to_ready - syncer:.1f} s added on top (target ≤ 5 s), "
                    f"{own:.1f} s of it the portal's own steps"
                )
                wakes(app, leads, requested, core, runtime)
            portal_of(app).engine.dispose()
    shutil.rmtree(folder, ignore_errors=True)


class Milestones:
    """When each step between an approval and a ready team was first seen on the cluster
    (polled every 50 ms on a thread of its own): the portal's own steps, the cluster's
    (the claim's volume bound, the pod started by the node) and the syncer's own start
    (from ``VClusterRuntime.starts``), so the approval → ready time is split by who spent
    it."""

    SEEN = ("installed", "volume bound", "syncer started", "syncer answers", "secret written")

    def __init__(self, api: Any, runtime: Any, team: str) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.runtime = runtime
        self.namespace = f"vcluster-{team}"
        self.team = team
        self.seen: dict[str, float] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop:
            # Before the namespace exists a look fails: it is looked at again.
            with contextlib.suppress(Exception):
                self._look()
            time.sleep(0.05)

    def _look(self) -> None:
        now = time.monotonic()
        ns = self.namespace
        if "installed" not in self.seen and self.apps.list_namespaced_stateful_set(ns).items:
            self.seen["installed"] = now
        claims = self.core.list_namespaced_persistent_volume_claim(ns).items
        if "volume bound" not in self.seen and any(c.status.phase == "Bound" for c in claims):
            self.seen["volume bound"] = now
        pods = self.core.list_namespaced_pod(
            ns, label_selector=f"app=vcluster,release={self.team}"
        ).items
        for pod in pods:
            began, served = self.runtime.starts.get(pod.metadata.uid, (None, None))
            if began is not None:
                self.seen.setdefault("syncer started", began)
            if served is not None:
                self.seen.setdefault("syncer answers", served)
        if (
            "secret written" not in self.seen
            and self.core.list_namespaced_secret(
                ns, field_selector=f"metadata.name=vc-{self.team}"
            ).items
        ):
            self.seen["secret written"] = now

    def split(self, approved: float, ready: float) -> dict[str, float]:
        """Approval → ready in parts, each from the milestone before it."""
        self._stop = True
        self._thread.join()
        missing = [m for m in self.SEEN if m not in self.seen]
        if missing:
            raise SystemExit(f"{self.team}: never seen: {', '.join(missing)}")
        at = [approved, *(self.seen[m] for m in self.SEEN), ready]
        names = (
            "portal: approval → chart installed",
            "cluster: → volume bound",
            "node: → syncer started",
            "syncer: own start",
            "syncer: → kubeconfig secret",
            "portal: → ready",
        )
        return {name: max(0.0, at[i + 1] - at[i]) for i, name in enumerate(names)}


def _syncer_start(runtime: Any, core: Any, team: str) -> float:
    """The syncer's own start for the team's current control-plane pod: its process
    started → its proxy serving (as the pod's readiness probe asks)."""
    pods = core.list_namespaced_pod(
        f"vcluster-{team}", label_selector=f"app=vcluster,release={team}"
    ).items
    began, served = runtime.starts[pods[0].metadata.uid]
    assert served is not None, f"{team}'s syncer never served"
    return float(served - began)


def wakes(
    app: Any, leads: dict[str, Any], requested: dict[str, Any], core: Any, runtime: Any
) -> None:
    """Each team put to sleep, then woken: wake asked → the vCluster's API answers the
    lead's kubeconfig from before the sleep → a new pod of the lead bound by KAI; beside
    the syncer's own start on that wake."""
    rows = [
        _wake_one(app, lead, team, requested[team]["team_id"], core, runtime)
        for team, lead in leads.items()
    ]
    served_s = statistics.median(r[0] for r in rows)
    bound_s = statistics.median(r[1] for r in rows)
    syncer_s = statistics.median(r[2] for r in rows)
    print(
        f"wake → API served: median {served_s:.1f} s, → first pod bound by KAI median "
        f"{bound_s:.1f} s, over {len(rows)} teams; the syncer's own start median "
        f"{syncer_s:.1f} s: the portal adds {served_s - syncer_s:.1f} s to the API served"
    )


def _passes_until(app: Any, done: Any, limit: float = 300) -> None:
    """Reconciler passes over every team (as the worker's) until ``done()``."""
    from app.runtime import portal_of

    factory = portal_of(app).session_factory
    started = time.perf_counter()
    while not done():
        if time.perf_counter() - started > limit:
            raise SystemExit(f"not in {limit:.0f} s")
        with unit_of_work(factory) as session:
            session.execute(update(TeamSchedule).values(next_attempt_at=utcnow()))
        portal_of(app).reconciler.run_once()
        time.sleep(0.1)


def _wake_one(
    app: Any, lead: Any, team: str, team_id: int, core: Any, runtime: Any
) -> tuple[float, float, float]:
    inside = client.CoreV1Api(_inside(lead, team_id))
    for pod in inside.list_namespaced_pod("default").items:
        inside.delete_namespaced_pod(pod.metadata.name, "default", grace_period_seconds=0)
    url = f"/api/v1/teams/{team_id}"
    said: list[str] = []

    def slept() -> bool:
        answer = lead.api("POST", f"{url}/sleep")
        said.append(answer.text)
        return bool(answer.status_code == 200)

    try:
        _passes_until(app, slept, limit=120)
    except SystemExit:
        raise SystemExit(f"{team} was not put to sleep: {said[-1]}") from None
    _passes_until(app, lambda: lead.get(url).json()["sleep"]["state"] == "asleep")
    asked = time.perf_counter()
    lead.api("POST", f"{url}/wake")

    def served() -> bool:
        try:
            inside.list_namespaced_pod("default", _request_timeout=2)
        except Exception:  # not served yet
            return False
        return True

    _passes_until(app, served)
    answered = time.perf_counter()
    name = f"{team}-after-wake"
    pod = _offered_pod(lead, team_id)
    pod["metadata"]["name"] = name
    inside.create_namespaced_pod("default", pod)
    while not any(
        (p.metadata.annotations or {}).get("vcluster.loft.sh/object-name") == name
        and p.spec.node_name
        for p in core.list_namespaced_pod(f"vcluster-{team}").items
    ):
        if time.perf_counter() - answered > 300:
            raise SystemExit(f"{team}'s pod was not bound in 300 s after the wake")
        time.sleep(0.1)
    bound = time.perf_counter()
    syncer = _syncer_start(runtime, core, team)
    print(
        f"{team}: wake → API served {answered - asked:.1f} s, → pod bound by KAI "
        f"{bound - asked:.1f} s; the syncer's own start {syncer:.1f} s"
    )
    return answered - asked, bound - asked, syncer


def _offered_pod(lead: Any, team_id: int) -> dict[str, Any]:
    """The GPU-fraction pod the team page offers, as shown."""
    import html
    import re

    import yaml

    page = lead.get(f"/teams/{team_id}").text
    found = re.search(r'<pre id="pod-spec-fraction"[^>]*><code>(.*?)</code></pre>', page, re.S)
    assert found, "the team page offers no GPU-fraction pod"
    pod: dict[str, Any] = yaml.safe_load(html.unescape(found.group(1)))
    return pod


def _inside(lead: Any, team_id: int) -> Any:
    import yaml

    answer = lead.api("POST", f"/api/v1/teams/{team_id}/kubeconfig?ttl=1h")
    assert answer.status_code == 200, answer.text
    return config.new_client_from_config_dict(yaml.safe_load(answer.text))


if __name__ == "__main__":
    main()
