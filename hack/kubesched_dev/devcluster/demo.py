"""A small demo workload: fake nodes across three zones and pending pods for our scheduler."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched_dev.devcluster.binaries import repo_root
from kubesched_dev.fixtures import (
    create_namespace,
    create_nodes,
    create_pods,
    install_crds,
    make_node,
    make_pod,
    new_api_client,
    post_object,
)

NAMESPACE = "demo"
ZONES = ("zone-a", "zone-b", "zone-c")
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
# (cpu, memory) requests, cycled through: small, medium, large and one BestEffort pod.
REQUESTS: tuple[tuple[str | None, str | None], ...] = (
    ("100m", "128Mi"),
    ("250m", "256Mi"),
    ("500m", "512Mi"),
    ("1", "1Gi"),
    (None, None),
    ("2", "4Gi"),
)
ZONE_PINNED = 2  # this many pods carry a nodeSelector on zone-a


@dataclass(frozen=True, slots=True)
class DemoResult:
    nodes_created: int
    pods_created: int
    crds: tuple[str, ...] = ()


def demo_nodes(count: int) -> list[dict[str, Any]]:
    return [
        make_node(
            f"demo-node-{i:03d}",
            labels={ZONE_LABEL: ZONES[i % len(ZONES)], REGION_LABEL: "demo-region"},
        )
        for i in range(count)
    ]


def demo_pods(count: int, scheduler_name: str) -> list[dict[str, Any]]:
    pods = []
    for i in range(count):
        cpu, memory = REQUESTS[i % len(REQUESTS)]
        app = "web" if i % 3 == 0 else "batch"
        pods.append(
            make_pod(
                f"demo-pod-{i:03d}",
                NAMESPACE,
                scheduler_name,
                cpu=cpu,
                memory=memory,
                labels={"app": app},
                node_selector={ZONE_LABEL: ZONES[0]} if i < ZONE_PINNED else None,
            )
        )
    return pods


WEB_SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": NAMESPACE},
    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
}


async def create_demo(kubeconfig: Path, nodes: int, pods: int, scheduler_name: str) -> DemoResult:
    """Install crds/ (from a checkout) and create the demo objects; existing ones are left as they are."""
    api = await new_api_client(kubeconfig)
    root = repo_root()
    try:
        crds = await install_crds(api, root / "crds") if root else []
        await create_namespace(api, NAMESPACE, skip_existing=True)
        await post_object(api, f"/api/v1/namespaces/{NAMESPACE}/services", WEB_SERVICE, skip_existing=True)
        nodes_created = await create_nodes(api, demo_nodes(nodes), skip_existing=True)
        pods_created = await create_pods(api, demo_pods(pods, scheduler_name), skip_existing=True)
    finally:
        await api.close()
    return DemoResult(nodes_created, pods_created, tuple(crds))
