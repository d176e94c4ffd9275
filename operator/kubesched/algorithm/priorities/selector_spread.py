"""SelectorSpreadPriority, alias ServiceSpreadingPriority (plugin SelectorSpread).

Spreads the pods of one Service, ReplicationController, ReplicaSet or StatefulSet over nodes and
zones: a node scores by how few matching pods it already runs, blended 1/3 node, 2/3 zone when
nodes carry zone labels. Pods with topologySpreadConstraints are left to PodTopologySpread and
score 0 here, as in 1.20.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kubesched.algorithm.framework import MAX_NODE_SCORE, Priority
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import EVERYTHING, LabelSelector, Requirement, SelectorError

ZONE_WEIGHTING = 2.0 / 3.0


def _in_namespace(objects: Mapping[str, Mapping[str, Any]], namespace: str) -> Iterator[Mapping[str, Any]]:
    """The objects of one namespace (what a namespaced lister's List returns)."""
    for key, obj in objects.items():
        meta = obj.get("metadata") or {}
        if (meta.get("namespace") or key.partition("/")[0]) == namespace:
            yield obj


def _map_selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _controller_requirements(objects: Mapping[str, Mapping[str, Any]], pod: Pod) -> list[Requirement] | None:
    """GetPodReplicaSets / GetPodStatefulSets: requirements of every matching selector.

    None when the listing fails as a whole in 1.20: the pod has no labels, nothing matches, or
    any selector in the namespace does not parse.
    """
    if not pod.labels:
        return None
    found: list[Requirement] = []
    matched = False
    for obj in _in_namespace(objects, pod.namespace):
        try:
            selector = LabelSelector.parse((obj.get("spec") or {}).get("selector"))
        except SelectorError:
            return None
        if selector.empty or not selector.matches(pod.labels):
            continue
        matched = True
        found.extend(selector.requirements)
    return found if matched else None


def default_selector(pod: Pod, objects: ClusterObjects) -> LabelSelector:
    """helper.DefaultSelector: the selectors of everything that selects the pod, ANDed."""
    label_set: dict[str, str] = {}
    for service in _in_namespace(objects.services, pod.namespace):
        selector = (service.get("spec") or {}).get("selector")
        # A Service without a selector selects nothing, not everything.
        if selector is not None and _map_selects(selector, pod.labels):
            label_set.update(selector)
    if pod.labels:
        for rc in _in_namespace(objects.replication_controllers, pod.namespace):
            selector = (rc.get("spec") or {}).get("selector") or {}
            if selector and _map_selects(selector, pod.labels):
                label_set.update(selector)
    result = LabelSelector.from_map(label_set) if label_set else EVERYTHING
    for controllers in (objects.replica_sets, objects.stateful_sets):
        requirements = _controller_requirements(controllers, pod)
        if requirements:
            result = result.add(requirements)
    return result


def count_matching_pods(namespace: str, selector: LabelSelector, node: NodeInfo) -> int:
    """Pods of the namespace on the node that the selector matches, not counting terminating ones."""
    if not node.pods or selector.empty:
        return 0
    count = 0
    for p in node.pods.values():
        if p.namespace == namespace and not p.deleting and selector.matches(p.labels):
            count += 1
    return count


class SelectorSpreadPriority(Priority):
    name = "SelectorSpreadPriority"

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        if pod.spec.get("topologySpreadConstraints"):
            return None
        return default_selector(pod, snapshot.objects)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        if state is None:
            return 0
        return count_matching_pods(pod.namespace, state, node)

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        if state is None:
            return
        if not any(scores):
            # No matching pod anywhere: every node and zone score is 100 (Go's blend of 100 and 100
            # is exactly 100.0 too), so skip the zone keys. The common case for a lone pod.
            scores[:] = [MAX_NODE_SCORE] * len(scores)
            return
        zones = [node.node.zone_key for node in nodes]
        counts_by_zone: dict[str, int] = {}
        for zone, count in zip(zones, scores, strict=True):
            if zone:
                counts_by_zone[zone] = counts_by_zone.get(zone, 0) + count
        max_by_node = max(scores, default=0)
        max_by_zone = max(counts_by_zone.values(), default=0)
        max_score = float(MAX_NODE_SCORE)
        # Float arithmetic in Go's order of operations, truncated to an integer at the end.
        for i, count in enumerate(scores):
            f_score = max_score
            if max_by_node > 0:
                f_score = max_score * (float(max_by_node - count) / float(max_by_node))
            zone = zones[i]
            if counts_by_zone and zone:
                zone_score = max_score
                if max_by_zone > 0:
                    zone_score = max_score * (float(max_by_zone - counts_by_zone[zone]) / float(max_by_zone))
                f_score = (f_score * (1.0 - ZONE_WEIGHTING)) + (ZONE_WEIGHTING * zone_score)
            scores[i] = int(f_score)
