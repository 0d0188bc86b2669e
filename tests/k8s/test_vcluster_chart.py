"""The values the portal gives vCluster, against the real chart (0.36.1, from ../shared):
its values.schema.json accepts them in every exposure mode, and it renders what each
mode needs."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.adapters.k8s import vcluster_values as vv
from tests.servers import tool
from tests.shared import shared


class _Team:
    team = "nlp"
    queue_label = "kai.scheduler/queue"
    queue_name = "team-nlp"
    vcluster_name = "nlp"
    namespace = "vcluster-nlp"
    # A template rendered in (catalog.rules.deploy_values and its vCluster values): the
    # real chart must take them beside the portal's own.
    template_values = json.dumps(
        {
            "controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "6Gi"}}}},
            "sync": {"toHost": {"ingresses": {"enabled": True}}},
            "experimental": {
                "deploy": {
                    "vcluster": {
                        "manifests": "apiVersion: v1\nkind: Namespace\n"
                        "metadata:\n  name: kubeflow\n",
                        "helm": [
                            {
                                "chart": {
                                    "name": "training-operator",
                                    "repo": "oci://registry.internal/charts",
                                    "version": "1.8.1",
                                },
                                "release": {"name": "training-operator", "namespace": "kubeflow"},
                                "values": "replicas: 1\n",
                            }
                        ],
                    }
                }
            },
        }
    )


@pytest.mark.parametrize(
    ("expose", "host", "sans"),
    [
        ("LoadBalancer", None, []),
        ("NodePort", None, ["10.0.0.5"]),
        ("Ingress", "nlp.vcluster.example.org", []),
    ],
)
def test_the_real_chart_takes_the_portals_values(
    tmp_path: Path, expose: str, host: str | None, sans: list[str]
) -> None:
    chart = shared("third_party/vcluster/vcluster-0.36.1.tgz")
    values = vv.vcluster_values(_Team(), expose=expose, ingress_host=host, extra_sans=sans)
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    rendered = subprocess.run(
        [
            str(tool("helm")),
            "template",
            "nlp",
            str(chart),
            "--namespace",
            "vcluster-nlp",
            "--kube-version",
            "1.35.4",
            "--values",
            str(tmp_path / "values.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "nlp")
    names = [p["name"] for p in service["spec"]["ports"]]
    assert "https" in names
    if expose == "Ingress":
        ingress = next(d for d in docs if d["kind"] == "Ingress")
        assert ingress["spec"]["rules"][0]["host"] == host
    else:
        assert service["spec"]["type"] == expose
    # Nodes are synced from the host: the chart asks for a ClusterRole to read them.
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")
    resources = {r for rule in cluster_role["rules"] for r in rule["resources"]}
    assert {"nodes", "nodes/status"} <= resources
    # The template's part is in the config the syncer reads, the portal's own kept.
    secret = next(
        d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "vc-config-nlp"
    )
    config = yaml.safe_load(base64.b64decode(secret["data"]["config.yaml"]))
    deploy = config["experimental"]["deploy"]["vcluster"]
    assert "name: kubeflow" in deploy["manifests"]
    assert deploy["helm"][0]["release"] == {"name": "training-operator", "namespace": "kubeflow"}
    assert config["controlPlane"]["statefulSet"]["resources"]["limits"]["memory"] == "6Gi"
    assert config["sync"]["toHost"]["pods"]["useSecretsForSATokens"] is True
    requests = config["controlPlane"]["statefulSet"]["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == ("200m", "256Mi")  # the portal's merged
