"""Small builders for the algorithm's unit tests: API-shaped dicts in, model objects out."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Node, Pod, node_from_dict, pod_from_dict
from kubesched.plugins.framework import SKIP, Predicate, Priority

_uids = itertools.count()


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
    allocatable: Mapping[str, Any] | None = None,
) -> Node:
    resources = dict(allocatable) if allocatable is not None else {"cpu": cpu, "memory": memory, "pods": pods}
    resources.update(extra or {})
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return node_from_dict(
        {
            "metadata": {"name": name, "uid": f"node-{name}", "labels": dict(labels or {})},
            "spec": spec,
            "status": {"allocatable": resources},
        }
    )


def container(
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    out: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": requests}}
    if ports:
        out["ports"] = [dict(p) for p in ports]
    return out


def make_pod(
    name: str = "pod",
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    containers: Sequence[Mapping[str, Any]] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    extra: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    node_name: str = "",
    deleting: bool = False,
    **spec: Any,
) -> Pod:
    """A pod; `spec` keyword arguments (nodeSelector=..., affinity=..., volumes=...) go into its spec."""
    if containers is None:
        containers = [container(cpu, memory, extra, ports)]
    full_spec: dict[str, Any] = {"containers": [dict(c) for c in containers], **spec}
    if init_containers:
        full_spec["initContainers"] = [dict(c) for c in init_containers]
    if node_name:
        full_spec["nodeName"] = node_name
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}-{next(_uids)}",
        "labels": dict(labels or {}),
    }
    if deleting:
        meta["deletionTimestamp"] = "2021-01-01T00:00:00Z"
    return pod_from_dict({"metadata": meta, "spec": full_spec})


def node_info(node: Node, pods: Iterable[Pod] = ()) -> NodeInfo:
    info = NodeInfo(node)
    for pod in pods:
        info = info.with_pod(pod)
    return info


def snapshot(*infos: NodeInfo | Node, objects: ClusterObjects | None = None) -> Snapshot:
    return Snapshot.of([i if isinstance(i, NodeInfo) else NodeInfo(i) for i in infos], objects)


def run_filter(
    predicate: Predicate, pod: Pod, info: NodeInfo, snap: Snapshot | None = None
) -> tuple[str, ...]:
    """prefilter then filter, as the algorithm runs them; SKIP means the pod fits."""
    state = predicate.prefilter(pod, snap or snapshot(info))
    if state is SKIP:
        return ()
    return tuple(predicate.filter(pod, state, info))


def run_priority(
    priority: Priority, pod: Pod, infos: Sequence[NodeInfo], snap: Snapshot | None = None
) -> list[int]:
    """prescore, score and normalize over `infos`, as the algorithm runs them."""
    snap = snap or snapshot(*infos)
    state = priority.prescore(pod, snap, infos)
    scores = [priority.score(pod, state, info) for info in infos]
    priority.normalize(pod, state, infos, scores)
    return scores


# The seed policy the project ships, read from the file users run with.
SEED_POLICY: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json").read_text()
)
