"""The benchmark's cluster: nodes in 5 zones with realistic allocatable, and a mixed pending workload.

Everything is drawn from a seeded generator, so every scheduler meets exactly the same nodes and
the same pods (in the same order), only with its own `schedulerName`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from kubesched_dev.fixtures import make_node, make_pod

ZONES = ("zone-a", "zone-b", "zone-c", "zone-d", "zone-e")
REGION = "region-1"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
SSD_LABEL = "disktype"
APPS = tuple(f"app-{i}" for i in range(10))
# Two Services select these apps: ServiceSpreadingPriority spreads their pods over nodes and zones.
SERVICE_APPS = ("app-0", "app-1")


@dataclass(frozen=True, slots=True)
class NodeShape:
    """A machine type as a cloud sells it, with the allocatable a kubelet reports after reservations."""

    name: str
    cpu: str
    memory: str
    share: float


NODE_SHAPES = (
    NodeShape("standard-4", "3920m", "13Gi", 0.40),
    NodeShape("standard-8", "7910m", "28Gi", 0.35),
    NodeShape("highmem-8", "7910m", "58Gi", 0.15),
    NodeShape("standard-16", "15890m", "58Gi", 0.10),
)
MAX_PODS_PER_NODE = "110"

# (cpu, memory) requests and how often each appears; None: BestEffort (no requests).
POD_REQUESTS: tuple[tuple[tuple[str, str] | None, float], ...] = (
    (None, 0.10),
    (("100m", "128Mi"), 0.20),
    (("250m", "256Mi"), 0.20),
    (("250m", "1Gi"), 0.10),
    (("500m", "512Mi"), 0.15),
    (("500m", "2Gi"), 0.10),
    (("1", "1Gi"), 0.10),
    (("1", "2Gi"), 0.05),
)
LARGEST_POD = ("1", "2Gi")
SELECTOR_SHARE = 0.15  # pods with a nodeSelector: half want an SSD node, half a zone
SSD_SHARE = 0.3


def make_nodes(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` Ready nodes, round-robin over 5 zones, shapes and SSD labels drawn with `seed`."""
    rng = random.Random(f"nodes-{seed}")
    shapes = rng.choices(NODE_SHAPES, weights=[s.share for s in NODE_SHAPES], k=count)
    nodes = []
    for i, shape in enumerate(shapes):
        zone = ZONES[i % len(ZONES)]
        labels = {
            **dict.fromkeys(ZONE_LABELS, zone),
            **dict.fromkeys(REGION_LABELS, REGION),
            "node.kubernetes.io/instance-type": shape.name,
        }
        if rng.random() < SSD_SHARE:
            labels[SSD_LABEL] = "ssd"
        name = node_name(i)
        nodes.append(make_node(name, shape.cpu, shape.memory, MAX_PODS_PER_NODE, labels=labels))
    return nodes


def node_name(index: int) -> str:
    return f"bench-node-{index:05d}"


def make_pods(count: int, namespace: str, scheduler_name: str, seed: int) -> list[dict[str, Any]]:
    """`count` pending pods: mixed requests, app labels for spreading, some node selectors."""
    rng = random.Random(f"pods-{seed}")
    requests = [r for r, _ in POD_REQUESTS]
    weights = [w for _, w in POD_REQUESTS]
    pods = []
    for i in range(count):
        shape = rng.choices(requests, weights=weights)[0]
        app = rng.choice(APPS)
        selector: dict[str, str] | None = None
        if rng.random() < SELECTOR_SHARE:
            selector = {SSD_LABEL: "ssd"} if rng.random() < 0.5 else {ZONE_LABELS[0]: rng.choice(ZONES)}
        cpu, memory = shape if shape else (None, None)
        pods.append(
            make_pod(
                pod_name(i),
                namespace,
                scheduler_name,
                cpu=cpu,
                memory=memory,
                labels={"app": app, "bench": "true"},
                node_selector=selector,
            )
        )
    return pods


def pod_name(index: int) -> str:
    return f"pod-{index:05d}"


def make_services(namespace: str) -> list[dict[str, Any]]:
    """Services selecting some of the apps, so that service spreading has something to spread."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"svc-{app}", "namespace": namespace},
            "spec": {"selector": {"app": app}, "ports": [{"port": 80, "protocol": "TCP"}]},
        }
        for app in SERVICE_APPS
    ]


def round_robin_fits(nodes: int, pods: int) -> bool:
    """Whether a binder that ignores capacity (the null binder) still cannot overcommit any node.

    Round-robin puts at most ceil(pods/nodes) pods on a node; they must fit the smallest node.
    """
    per_node = math.ceil(pods / max(nodes, 1))
    smallest = min(NODE_SHAPES, key=lambda s: parse_cpu(s.cpu))
    return (
        per_node * parse_cpu(LARGEST_POD[0]) <= parse_cpu(smallest.cpu)
        and per_node * parse_memory(LARGEST_POD[1]) <= parse_memory(smallest.memory)
        and per_node <= int(MAX_PODS_PER_NODE)
    )


# ----------------------------------------------------------------------------------------- quantities
# The audit's own small parser (not kubesched's): the harness must not trust the code it measures.

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": 10**-9, "u": 10**-6, "m": 10**-3, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def parse_quantity(text: str) -> float:
    """A Kubernetes quantity ("250m", "1.5Gi", "2", "1e3") as a plain number."""
    text = str(text).strip()
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    if text and text[-1] in _DECIMAL:
        return float(text[:-1]) * _DECIMAL[text[-1]]
    return float(text)


def parse_cpu(text: str) -> int:
    """Millicores, rounded up as the API server does."""
    return math.ceil(round(parse_quantity(text) * 1000, 6))


def parse_memory(text: str) -> int:
    """Bytes."""
    return math.ceil(parse_quantity(text))
