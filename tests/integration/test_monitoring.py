"""The monitoring kit against a running kubesched: every metric a dashboard panel or an alert names is
one the process exports, scraped from its /metrics after real scheduling; and the kit's pieces build
with the kubectl of the local Kubernetes build (whose kustomize, v2.0, knows no components) and,
where a newer kustomize is at hand, together with the base as the overlay of docs/how-to/monitoring.md
does."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_namespace, create_nodes, create_pods, make_node, make_pod, wait_for

from ..monitoring_kit import DASHBOARD, KIT, REPO, all_queries, exported_series, unexported
from .kubeapi import events_for, wait_bound
from .kubesched_process import KubeschedProcess
from .test_policies import Policies

QPS, BURST = 400, 800
WIDGET = "example.com/monitoring-widget"
EXAMPLE = REPO / "examples" / "monitoring"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def value(series: str, exposition: str) -> float | None:
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def kubesched(
    control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> Iterator[tuple[KubeschedProcess, int]]:
    """A kubesched with leader election (as deployed), its metrics on a free port, a client budget set."""
    port = free_port()
    args = [
        f"--metrics-port={port}",
        f"--kube-api-qps={QPS}",
        f"--kube-api-burst={BURST}",
        "--shadow-status-interval=1s",
    ]
    with KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path, args) as proc:
        proc.wait_for_log("cache_synced")
        yield proc, port


async def test_every_metric_the_dashboard_and_the_alerts_name_is_exported(
    api: ApiClient, namespace: str, kubesched: tuple[KubeschedProcess, int], policies: Policies
) -> None:
    proc, port = kubesched
    name = proc.scheduler_name
    # A Shadow policy beside the base algorithm (agreement figures) and a rejected one.
    shadow, typo = f"shadow-{namespace}", f"typo-{namespace}"
    most = [{"name": "MostRequestedPriority", "weight": 1}]
    await policies.create(shadow, {"schedulerName": name, "mode": "Shadow", "priorities": most})
    await policies.create(
        typo, {"schedulerName": name, "priorities": [{"name": "MostRequestedPriorty", "weight": 1}]}
    )
    await policies.wait_status(shadow, 1, "True", "False")  # written by the leader: it is in force
    await policies.wait_status(typo, 1, "False", "False")
    # An ElasticQuota of a namespace of its own, in a resource nobody asks for: the quota series,
    # and no change to what other quotas admit.
    quotas = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}-quota/elasticquotas"
    await create_namespace(api, f"{namespace}-quota")
    spec = {"min": {WIDGET: "1"}, "max": {WIDGET: "2"}}
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "spec": spec}
    status, reply = await request(api, "POST", quotas, {**quota, "metadata": {"name": "eq"}})
    assert status == 201, reply
    try:
        await _scheduled_and_scraped(api, namespace, proc, port, name, shadow, typo)
    finally:
        status, reply = await request(api, "DELETE", f"{quotas}/eq")
        assert status in (200, 404), reply


async def _scheduled_and_scraped(
    api: ApiClient, namespace: str, proc: KubeschedProcess, port: int, name: str, shadow: str, typo: str
) -> None:
    # Three pods that fit, one that fits nowhere.
    await create_nodes(api, [make_node(f"mon-{i}", cpu="2", memory="4Gi") for i in range(2)])
    fitting = [make_pod(f"web-{i}", namespace, name, cpu="500m", memory="256Mi") for i in range(3)]
    await create_pods(api, [*fitting, make_pod("too-big", namespace, name, cpu="64")])
    await wait_bound(api, namespace, 3)

    async def unschedulable() -> bool:
        return any(e["reason"] == "FailedScheduling" for e in await events_for(api, namespace, "too-big"))

    await wait_for(unschedulable, timeout=30, message="too-big reported unschedulable")

    def settled() -> str | None:
        """The page once the leader, the queue, both policies and the shadow's figures show in it."""
        page = scrape(port)
        wanted = {
            f'leader_election_master_status{{name="{name}"}}': 1.0,
            'scheduler_pending_pods{queue="unschedulable"}': 1.0,
            f'kubesched_policy_accepted{{policy="{shadow}"}}': 1.0,
            f'kubesched_policy_accepted{{policy="{typo}"}}': 0.0,
            f'kubesched_quota_max{{quota_namespace="{namespace}-quota",resource="{WIDGET}"}}': 2.0,
        }
        shown = all(value(series, page) == expected for series, expected in wanted.items())
        return page if shown and "kubesched_shadow_evaluations_total{" in page else None

    page = await wait_for(
        lambda: asyncio.to_thread(settled), timeout=60, interval=0.5, message="metrics settled"
    )
    assert page is not None

    assert unexported(all_queries(), exported_series(page)) == []
    assert value("kubesched_client_qps_limit", page) == QPS
    assert value("kubesched_client_burst_limit", page) == BURST
    assert (value('kubesched_policy_reloads_total{result="accepted"}', page) or 0) >= 1
    assert (value('kubesched_policy_reloads_total{result="invalid"}', page) or 0) >= 1


# ------------------------------------------------------------------------------------ kustomize


def kubectl_1_20(control_plane: LocalControlPlane, *args: str, stdin: str | None = None) -> str:
    command = [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", str(control_plane.kubeconfig), *args]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def by_kind(built: str) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(built) if d}


def test_kubectl_1_20_builds_the_kit_s_pieces_and_the_api_server_takes_the_dashboard(
    control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """kubectl 1.20 refuses `kind: Component`: the same resources and generator in a Kustomization."""
    component = yaml.safe_load((KIT / "kustomization.yaml").read_text())
    (generator,) = component["configMapGenerator"]
    options = generator.pop("options")
    for entry in [*component["resources"], *(f.split("=")[-1] for f in generator["files"])]:
        shutil.copy(KIT / entry, tmp_path / entry)
    plain = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": component["resources"],
        "configMapGenerator": [generator],
        "generatorOptions": options,
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(plain))
    objects = by_kind(kubectl_1_20(control_plane, "kustomize", str(tmp_path)))
    assert set(objects) == {
        "ServiceMonitor/kubesched",
        "PrometheusRule/kubesched",
        "ConfigMap/kubesched-dashboard",
    }
    configmap = objects["ConfigMap/kubesched-dashboard"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["kubesched.json"]) == json.loads(DASHBOARD.read_text())
    # The API server itself accepts the ConfigMap (the namespace as after `kubectl apply -k manifests/`).
    kubectl_1_20(control_plane, "apply", "-f", str(REPO / "manifests" / "namespace.yaml"))
    kubectl_1_20(control_plane, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(configmap))


def components_capable_kustomize() -> list[str] | None:
    """`kustomize build` or `kubectl kustomize` of a version that knows components (3.7 / 1.21), if any."""
    if standalone := shutil.which("kustomize"):
        return [standalone, "build"]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    result = subprocess.run(
        [kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        return None
    version = json.loads(result.stdout)["clientVersion"]
    minor = int("".join(c for c in version["minor"] if c.isdigit()) or 0)
    return [kubectl, "kustomize"] if (int(version["major"]), minor) >= (1, 21) else None


def test_the_example_overlay_is_the_base_plus_the_kit(control_plane: LocalControlPlane) -> None:
    command = components_capable_kustomize()
    if command is None:
        pytest.skip(
            "no kustomize >= 3.7 or kubectl >= 1.21 on PATH (kubectl 1.20's kustomize knows no components)"
        )
    result = subprocess.run([*command, str(EXAMPLE)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    combined = by_kind(result.stdout)
    base = by_kind(kubectl_1_20(control_plane, "kustomize", str(REPO / "manifests")))
    assert set(combined) - set(base) == {
        "ServiceMonitor/kubesched",
        "PrometheusRule/kubesched",
        "ConfigMap/kubesched-dashboard",
    }
    assert set(base) <= set(combined)
    configmap = combined["ConfigMap/kubesched-dashboard"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["kubesched.json"]) == json.loads(DASHBOARD.read_text())
