"""The objects the portal writes, as plain dicts: no API server, no cluster.

KAI's units and the always-written `limit` matter most: an omitted field is 0, and a
`limit` of 0 caps a queue at its quota on a real cluster."""

from __future__ import annotations

from typing import Any

import yaml

from app.adapters.k8s import coredns
from app.adapters.k8s import manifests as m
from app.adapters.k8s import vcluster_values as vv
from app.core.models import Org, Pool, Team
from app.core.quota import Line, Quota
from app.provisioning.backend import TeamSpec, spec_for

OWNED = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "nlp"}


def design_source_spec(
    cpu: int | None = None, memory: int | None = None, weight: int = 100
) -> TeamSpec:
    """The design source's team: 0.33 GPU guaranteed, limit 1 (CPU in millicores and
    memory in megabytes where given)."""
    org = Org.with_pool("ml-org", {"gpu": 100, "cpu": 40_000, "memory": 160_000})
    return spec_for(
        _team(
            org, Quota((Line(33, 100, weight), Line(cpu, None, weight), Line(memory, None, weight)))
        ),
        org,
    )


ORG = Org.with_pool("ml-org", {"gpu": 100})


def _team(org: Org, value: Quota) -> Team:
    team = Team(name="nlp")
    team.set_quota(org.default_pool, value)
    return team


def test_team_queue_has_all_three_fields_for_every_resource() -> None:
    assert m.make_queue(design_source_spec()) == {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "team-nlp", "labels": OWNED},
        "spec": {
            "displayName": "nlp",
            "parentQueue": "ml-org",
            "priority": 100,
            "resources": {
                "gpu": {"quota": 0.33, "limit": 1.0, "overQuotaWeight": 1.0},
                "cpu": {"quota": 0.0, "limit": -1.0, "overQuotaWeight": 1.0},
                "memory": {"quota": 0.0, "limit": -1.0, "overQuotaWeight": 1.0},
            },
        },
    }


def test_cpu_in_millicpus_and_memory_in_megabytes() -> None:
    spec = design_source_spec(cpu=2_500, memory=16_000, weight=250)
    resources = m.make_queue(spec)["spec"]["resources"]
    assert resources["cpu"] == {"quota": 2500.0, "limit": -1.0, "overQuotaWeight": 2.5}
    assert resources["memory"] == {"quota": 16000.0, "limit": -1.0, "overQuotaWeight": 2.5}


def test_parent_queue_carries_the_pool_without_a_cap() -> None:
    assert m.make_parent_queue(design_source_spec()) == {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "ml-org", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}},
        "spec": {
            "displayName": "ml-org",
            "resources": {
                "gpu": {"quota": 1.0, "limit": -1.0, "overQuotaWeight": 1.0},
                "cpu": {"quota": 40000.0, "limit": -1.0, "overQuotaWeight": 1.0},
                "memory": {"quota": 160000.0, "limit": -1.0, "overQuotaWeight": 1.0},
            },
        },
    }


def test_namespace_and_portal_binding() -> None:
    spec = design_source_spec()
    assert m.make_namespace(spec) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "vcluster-nlp", "labels": OWNED},
    }
    binding = m.make_portal_binding(spec, "gpu-portal/portal", "gpu-portal-team-namespace")
    assert binding["metadata"] == {"name": "gpu-portal", "namespace": "vcluster-nlp",
                                   "labels": OWNED}  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "portal", "namespace": "gpu-portal"}
    ]
    assert binding["roleRef"]["name"] == "gpu-portal-team-namespace"


def test_policy_pins_synced_pods_to_kai_and_the_team_queue() -> None:
    spec = design_source_spec()
    policy = m.make_policy(spec)
    assert policy["metadata"]["name"] == "gpu-portal-queue-nlp"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert [v["expression"] for v in policy["spec"]["validations"]] == [
        "object.spec.schedulerName == 'kai-scheduler'",
        "has(object.metadata.labels) && 'kai.scheduler/queue' in object.metadata.labels && "
        "object.metadata.labels['kai.scheduler/queue'] == 'team-nlp'",
    ]
    assert m.make_policy_binding(spec)["spec"] == {
        "policyName": "gpu-portal-queue-nlp",
        "validationActions": ["Deny"],
        "matchResources": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "vcluster-nlp"}},
            "objectSelector": {
                "matchExpressions": [{"key": "vcluster.loft.sh/managed-by", "operator": "Exists"}]
            },
        },
    }


def test_vcluster_values_per_exposure() -> None:
    spec = design_source_spec()
    plane: dict[str, Any] = {
        "statefulSet": {
            "resources": {
                "requests": {"cpu": "200m", "memory": "256Mi"},
                "limits": {"memory": "4Gi"},
            },
            "persistence": {"volumeClaim": {"size": "5Gi"}},
        }
    }
    plane["coredns"] = {
        "overwriteManifests": coredns.manifests(
            queue_label="kai.scheduler/queue", queue="team-nlp", scheduler="kai-scheduler"
        )
    }
    base = {
        "experimental": {"syncSettings": {"setOwner": False}},
        "sync": {
            "fromHost": {"nodes": {"enabled": True, "selector": {"all": True}}},
            "toHost": {"pods": {"useSecretsForSATokens": True}},
        },
        "networking": {"advanced": {"proxyKubelets": {"byHostname": False, "byIP": False}}},
        "telemetry": {"enabled": False},
    }
    svc = ["nlp.vcluster-nlp.svc"]  # how the portal reaches it from inside the cluster
    assert vv.vcluster_values(spec, expose="LoadBalancer", ingress_host=None, extra_sans=[]) == {
        **base,
        "controlPlane": {
            **plane,
            "service": {"spec": {"type": "LoadBalancer"}},
            "proxy": {"extraSANs": svc},
        },
    }
    assert vv.vcluster_values(
        spec, expose="NodePort", ingress_host=None, extra_sans=["10.0.0.5", ""]
    ) == {
        **base,
        "controlPlane": {
            **plane,
            "service": {"spec": {"type": "NodePort"}},
            "proxy": {"extraSANs": [*svc, "10.0.0.5"]},
        },
    }
    assert vv.vcluster_values(
        spec, expose="Ingress", ingress_host="nlp.vc.example.org", extra_sans=[]
    ) == {
        **base,
        "controlPlane": {
            **plane,
            "ingress": {"enabled": True, "host": "nlp.vc.example.org"},
            "proxy": {"extraSANs": svc},
        },
    }


def test_vcluster_values_for_a_mirrored_cluster() -> None:
    values = vv.vcluster_values(
        design_source_spec(),
        expose="LoadBalancer",
        ingress_host=None,
        extra_sans=[],
        plane=vv.ControlPlane(
            image_registry="registry.internal:5000",
            telemetry=True,
            cpu_request="1",
            memory_request="1Gi",
            memory_limit="8Gi",
            storage_size="20Gi",
            storage_class="fast-ssd",
        ),
    )
    plane = values["controlPlane"]
    assert plane["advanced"] == {"defaultImageRegistry": "registry.internal:5000"}
    assert plane["statefulSet"]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "8Gi"},
    }
    assert plane["statefulSet"]["persistence"]["volumeClaim"] == {
        "size": "20Gi",
        "storageClass": "fast-ssd",
    }
    assert values["telemetry"] == {"enabled": True}


def test_the_vclusters_own_coredns_is_pinned_like_any_team_pod() -> None:
    """CoreDNS is synced to the host with vcluster.loft.sh/managed-by: it gets the queue
    label the policy requires and KAI as its scheduler, and the images follow the mirror."""
    spec = spec_for(
        _team(ORG, Quota.of_gpu(33, 100)),
        ORG,
        queue_label="runai/queue",
    )
    values = vv.vcluster_values(
        spec,
        expose="LoadBalancer",
        ingress_host=None,
        extra_sans=[],
        plane=vv.ControlPlane(image_registry="registry.internal:5000/"),
    )
    docs = list(yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"]))
    assert [d["kind"] for d in docs] == [
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
        "Service",
    ]  # fmt: skip
    deployment = docs[4]
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"] == {"k8s-app": "vcluster-kube-dns", "runai/queue": "team-nlp"}
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["spec"]["containers"][0]["image"] == "registry.internal:5000/coredns/coredns:1.14.2"
    assert deployment["spec"]["selector"] == {"matchLabels": {"k8s-app": "vcluster-kube-dns"}}
    assert docs[5]["spec"]["selector"] == {"k8s-app": "vcluster-kube-dns"}
    # The policy the host applies to it accepts exactly this pod.
    validations = m.make_policy(spec)["spec"]["validations"]
    assert validations[0]["expression"] == "object.spec.schedulerName == 'kai-scheduler'"
    assert "'runai/queue'" in validations[1]["expression"]
    plain = vv.vcluster_values(spec, expose="LoadBalancer", ingress_host=None, extra_sans=[])
    assert (
        "image: docker.io/coredns/coredns:1.14.2"
        in (plain["controlPlane"]["coredns"]["overwriteManifests"])
    )


def test_the_queue_label_is_a_setting() -> None:
    """KAI's first release read runai/queue; the policy pins whatever label KAI reads."""
    spec = spec_for(
        _team(ORG, Quota.of_gpu(33, 100)),
        ORG,
        queue_label="runai/queue",
    )
    expression = m.make_policy(spec)["spec"]["validations"][1]["expression"]
    assert expression == (
        "has(object.metadata.labels) && 'runai/queue' in object.metadata.labels && "
        "object.metadata.labels['runai/queue'] == 'team-nlp'"
    )


def test_installer_arguments_for_each_chart_source() -> None:
    """Where the chart comes from decides the installer's arguments: a repository (the
    public one or a mirror), an OCI repository (the exact chart tag, since the CLI hands
    a chart path to helm without a version), or an archive on disk."""
    from app.adapters.k8s.vcluster import cli_create_args, helm_install_args
    from app.core.config import Settings

    spec = design_source_spec()

    def both(source: str) -> tuple[list[str], list[str]]:
        settings = Settings.model_construct(
            **{**Settings(development=True).model_dump(), "vcluster_chart_repo": source}
        )
        return (
            cli_create_args(spec, settings, "/tmp/v.yaml"),
            helm_install_args(spec, settings, "/tmp/v.yaml"),
        )

    common = ["--namespace", "vcluster-nlp", "--values", "/tmp/v.yaml"]
    cli, helm = both("https://charts.loft.sh")
    assert cli == [
        "create",
        "nlp",
        *common,
        "--connect=false",
        "--chart-version",
        "0.36.1",
        "--chart-repo",
        "https://charts.loft.sh",
        "--upgrade",
    ]
    assert helm == [
        "upgrade",
        "--install",
        "nlp",
        "vcluster",
        "--repo",
        "https://charts.loft.sh",
        "--version",
        "0.36.1",
        *common,
    ]
    cli, helm = both("oci://registry.internal/charts/")
    assert (
        cli[cli.index("--local-chart-dir") + 1] == "oci://registry.internal/charts/vcluster:0.36.1"
    )
    assert helm[3:6] == ["oci://registry.internal/charts/vcluster", "--version", "0.36.1"]
    cli, helm = both("/charts/vcluster-0.36.1.tgz")
    assert cli[cli.index("--local-chart-dir") + 1] == "/charts/vcluster-0.36.1.tgz"
    assert "--chart-repo" not in cli
    assert helm[3:5] == ["/charts/vcluster-0.36.1.tgz", "--namespace"]


def _two_pool_spec() -> TeamSpec:
    """The design source's team, also given 1.5 GPU (limit 2, weight 3) in an L40S pool
    of 4 GPUs whose nodes carry kai.scheduler/node-pool: l40s."""
    org = Org.with_pool("ml-org", {"gpu": 100})
    l40s = Pool(name="l40s", label_value="l40s")
    l40s.set_capacity({"gpu": 400})
    org.pools.append(l40s)
    team = _team(org, Quota.of_gpu(33, 100))
    team.set_quota(l40s, Quota.of_gpu(150, 200, weight=300))
    return spec_for(team, org)


def test_a_team_in_a_second_pool_gets_a_queue_there_under_the_org_queue_of_that_pool() -> None:
    """KAI's shard for a pool sees only the queues labelled with its value: the team's
    queue there hangs from the org's queue of that pool, both labelled, both with every
    resource's three fields; the default pool's queues stay exactly as they were."""
    spec = _two_pool_spec()
    assert m.make_queue(spec) == m.make_queue(design_source_spec())
    (pool,) = spec.pools
    queue = m.make_pool_queue(spec, pool)
    assert queue["metadata"] == {
        "name": "team-nlp-l40s",
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-portal",
            "gpu-portal.io/team": "nlp",
            "kai.scheduler/node-pool": "l40s",
        },
    }
    assert queue["spec"]["parentQueue"] == "ml-org-l40s"
    assert queue["spec"]["resources"]["gpu"] == {"quota": 1.5, "limit": 2.0, "overQuotaWeight": 3.0}
    assert queue["spec"]["resources"]["cpu"] == {
        "quota": 0.0,
        "limit": -1.0,
        "overQuotaWeight": 3.0,
    }
    parent = m.make_pool_parent_queue(spec, pool)
    assert parent["metadata"] == {
        "name": "ml-org-l40s",
        "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "kai.scheduler/node-pool": "l40s"},
    }
    assert "parentQueue" not in parent["spec"]
    assert parent["spec"]["resources"]["gpu"] == {
        "quota": 4.0,
        "limit": -1.0,
        "overQuotaWeight": 1.0,
    }


def test_the_policy_admits_each_queue_only_with_its_own_pool_label() -> None:
    """A pod naming the L40S queue without the pool label (or the default queue with
    it) would wait forever unseen: the policy refuses both, and says which pairs hold."""
    spec = _two_pool_spec()
    rule = m.make_policy(spec)["spec"]["validations"][1]
    labels = "object.metadata.labels"
    assert rule["expression"] == (
        f"has({labels}) && 'kai.scheduler/queue' in {labels} && "
        f"(({labels}['kai.scheduler/queue'] == 'team-nlp' && "
        f"!('kai.scheduler/node-pool' in {labels})) || "
        f"({labels}['kai.scheduler/queue'] == 'team-nlp-l40s' && "
        f"'kai.scheduler/node-pool' in {labels} && {labels}['kai.scheduler/node-pool'] == 'l40s'))"
    )
    assert rule["message"] == (
        "pods of team nlp must carry one of: kai.scheduler/queue: team-nlp without "
        "kai.scheduler/node-pool; or kai.scheduler/queue: team-nlp-l40s with "
        "kai.scheduler/node-pool: l40s"
    )
