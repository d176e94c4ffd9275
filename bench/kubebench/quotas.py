"""The quota workload: the batch mix's pods spread over 5 namespaces, each with an ElasticQuota
(scheduling.x-k8s.io/v1alpha1) that kubesched enforces at admission.

kube-scheduler 1.20 knows no ElasticQuota, so this class compares kubesched with itself: the same
pods once under the quotas and once with no ElasticQuota at all. The quotas borrow by upstream's
rule: some namespaces need more than their `min` and borrow what the others leave of theirs; the
mins add up to a little more than the demand (so every pod fits in the end) and far less than the
cluster; each `max` is above the namespace's `min` and its demand. The audit replays the binds in
the order the harness saw them and checks that no namespace's requests ever passed its `max`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubebench import workload
from kubebench.audit import pod_requests

# The coscheduling API's names (scheduler-plugins apis/scheduling/v1alpha1), not kubesched's code.
GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
CRD_NAME = f"elasticquotas.{GROUP}"
# Each namespace's share of the pods, and its min as a multiple of its own demand: the first two
# borrow, the others lend; the mins add up to about 1.04 times the demand.
SHARES = (0.3, 0.25, 0.2, 0.15, 0.1)
MIN_OF_DEMAND = (0.7, 0.9, 1.2, 1.4, 1.5)
MAX_OF_DEMAND = 1.25  # every max is above both the namespace's demand and its min
RESOURCES = ("cpu", "memory")


def elastic_quotas_path(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/elasticquotas"


def quota_namespaces(namespace: str) -> list[str]:
    return [f"{namespace}-q{i}" for i in range(len(SHARES))]


def make_quota_pods(count: int, namespace: str, scheduler_name: str, seed: int) -> list[dict[str, Any]]:
    """The batch mix's `count` pods, in their order, dealt to the quota namespaces by SHARES (names
    stay unique across them)."""
    pods = workload.make_pods(count, namespace, scheduler_name, seed)
    namespaces = quota_namespaces(namespace)
    bounds = [round(count * sum(SHARES[: i + 1])) for i in range(len(SHARES))]
    for i, pod in enumerate(pods):
        # Interleaved, not in blocks: every namespace has pods pending from the start to the end.
        slot = (i * 7919) % count
        pod["metadata"]["namespace"] = namespaces[next(n for n, b in enumerate(bounds) if slot < b)]
    return pods


def demand(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per namespace, what its pods request in all: {"cpu": millicores, "memory": bytes}."""
    found: dict[str, dict[str, int]] = {}
    for pod in pods:
        cpu, memory = pod_requests(dict(pod))
        total = found.setdefault(pod["metadata"]["namespace"], {"cpu": 0, "memory": 0})
        total["cpu"] += cpu
        total["memory"] += memory
    return found


def quota_bounds(pods: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """Per namespace its {"min": ..., "max": ...} amounts, from its demand."""
    wanted = demand(pods)
    bounds = {}
    for i, namespace in enumerate(sorted(wanted)):
        need = wanted[namespace]
        bounds[namespace] = {
            "min": {r: math.ceil(need[r] * MIN_OF_DEMAND[i]) for r in RESOURCES},
            "max": {r: math.ceil(need[r] * max(MAX_OF_DEMAND, MIN_OF_DEMAND[i] * 1.1)) for r in RESOURCES},
        }
    return bounds


def make_elastic_quotas(pods: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ElasticQuota per namespace of `pods`."""
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace, "labels": {"bench": "true"}},
            "spec": {
                bound: {"cpu": f"{amounts['cpu']}m", "memory": str(amounts["memory"])}
                for bound, amounts in limits.items()
            },
        }
        for namespace, limits in quota_bounds(pods).items()
    ]


def over_max(
    bind_order: Sequence[str], pods: Mapping[str, Mapping[str, Any]], quotas: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The binds, replayed in order (pod names), after which a namespace's requests passed its
    quota's `max`: "pod: ns cpu 1200m > 1000m". Nothing in a bench run finishes or is deleted, so
    use only grows."""
    limits = {
        q["metadata"]["namespace"]: {r: _quantity(r, v) for r, v in (q["spec"].get("max") or {}).items()}
        for q in quotas
    }
    used: dict[str, dict[str, int]] = {}
    found = []
    for name in bind_order:
        pod = pods[name]
        namespace = pod["metadata"]["namespace"]
        cpu, memory = pod_requests(dict(pod))
        total = used.setdefault(namespace, {"cpu": 0, "memory": 0})
        total["cpu"] += cpu
        total["memory"] += memory
        limit = limits.get(namespace, {})
        for resource in RESOURCES:
            if resource in limit and total[resource] > limit[resource]:
                found.append(f"{name}: {namespace} {resource} {total[resource]} > {limit[resource]}")
    return found


def _quantity(resource: str, value: Any) -> int:
    return workload.parse_cpu(str(value)) if resource == "cpu" else workload.parse_memory(str(value))
