"""The gang workload: PodGroups (scheduling.x-k8s.io/v1alpha1) whose pods kubesched places all or nothing.

kube-scheduler 1.20 has no gangs, so this class compares kubesched with itself: the same pods once
in PodGroups (minMember = the group's size) and once without the group label and with no
PodGroups. Every pod also carries `bench-group`, which no scheduler reads, so that the harness can
time the would-be groups of the run without PodGroups as well.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kubebench import workload

# The coscheduling API's names (scheduler-plugins apis/scheduling/v1alpha1), not kubesched's code:
# the harness must not trust what it measures.
GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
CRD_NAME = f"podgroups.{GROUP}"
POD_GROUP_LABEL = f"{GROUP}/pod-group"
LEGACY_POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
BENCH_GROUP_LABEL = "bench-group"
MIXED_SIZES = (2, 64)


def pod_groups_path(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups"


def group_sizes(groups: int, size: int, mixed: int, seed: int) -> tuple[int, ...]:
    """`groups` groups of `size` and `mixed` groups of 2-64, drawn and shuffled with `seed`."""
    rng = random.Random(f"groups-{seed}")
    sizes = [size] * groups + [rng.randint(*MIXED_SIZES) for _ in range(mixed)]
    # Interleaved, so that the mixed groups are not all queued behind the uniform ones.
    rng.shuffle(sizes)
    return tuple(sizes)


def group_name(index: int) -> str:
    return f"group-{index:03d}"


def member_name(group: str, index: int) -> str:
    return f"{group}-{index:03d}"


def make_gang_pods(
    sizes: Sequence[int], namespace: str, scheduler_name: str, seed: int, *, grouped: bool
) -> list[dict[str, Any]]:
    """The pods of groups of `sizes`, drawn as `workload.make_pods` draws them (so they all fit);
    `grouped`: with the PodGroup label, otherwise the same pods without it."""
    pods = workload.make_pods(sum(sizes), namespace, scheduler_name, seed)
    members = iter(pods)
    for g, size in enumerate(sizes):
        group = group_name(g)
        for m in range(size):
            pod = next(members)
            meta = pod["metadata"]
            meta["name"] = member_name(group, m)
            meta["labels"][BENCH_GROUP_LABEL] = group
            if grouped:
                meta["labels"][POD_GROUP_LABEL] = group
    return pods


def make_pod_groups(sizes: Sequence[int], namespace: str) -> list[dict[str, Any]]:
    """One PodGroup per group, minMember = its size: every member is needed."""
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": group_name(g), "namespace": namespace, "labels": {"bench": "true"}},
            "spec": {"minMember": size},
        }
        for g, size in enumerate(sizes)
    ]


def members_of(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Group -> its pods' names, from the `bench-group` label (present with PodGroups or without)."""
    found: dict[str, list[str]] = {}
    for pod in pods:
        group = (pod["metadata"].get("labels") or {}).get(BENCH_GROUP_LABEL)
        if group:
            found.setdefault(group, []).append(pod["metadata"]["name"])
    return found


def pod_group_of(pod: Mapping[str, Any]) -> str:
    """The PodGroup a pod names, the newer label first, as coscheduling reads them; "" for none."""
    labels = pod["metadata"].get("labels") or {}
    return str(labels.get(POD_GROUP_LABEL) or labels.get(LEGACY_POD_GROUP_LABEL) or "")


def group_figures(
    bound: Mapping[str, tuple[float, str]],
    members: Mapping[str, Sequence[str]],
    created_at: Mapping[str, float],
) -> dict[str, Any]:
    """Per group, from its last member's creation to its last member's bind (`group_done_*_s`), and
    from its first member's bind to its last (`group_spread_*_s`), over the groups fully bound."""
    done: list[float] = []
    spread: list[float] = []
    for names in members.values():
        times = [bound[n][0] for n in names if n in bound]
        if not names or len(times) < len(names):
            continue
        done.append(max(0.0, max(times) - max(created_at[n] for n in names)))
        spread.append(max(times) - min(times))
    figures: dict[str, Any] = {"groups_bound": len(done)}
    if done:
        figures.update(
            group_done_p50_s=round(float(np.percentile(done, 50)), 3),
            group_done_p95_s=round(float(np.percentile(done, 95)), 3),
            group_done_max_s=round(max(done), 3),
            group_spread_p50_s=round(float(np.percentile(spread, 50)), 3),
            group_spread_max_s=round(max(spread), 3),
        )
    return figures


def makespan_figures(bound: Mapping[str, tuple[float, str]], started: float) -> dict[str, Any]:
    """From the scheduler's start to its last bind, and the pods/s that makes."""
    if not bound:
        return {}
    makespan = max(t for t, _ in bound.values()) - started
    if makespan <= 0:
        return {}
    return {"makespan_s": round(makespan, 3), "makespan_pods_per_s": round(len(bound) / makespan, 1)}


def has_pod_group_crd(directory: Path) -> bool:
    """Whether `directory`'s YAML files define the PodGroup CustomResourceDefinition."""
    for path in sorted(directory.glob("*.yaml")):
        for manifest in yaml.safe_load_all(path.read_text()):
            if (manifest or {}).get("kind") == "CustomResourceDefinition" and (
                manifest.get("metadata") or {}
            ).get("name") == CRD_NAME:
                return True
    return False
