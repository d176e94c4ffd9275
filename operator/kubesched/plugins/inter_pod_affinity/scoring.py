"""InterPodAffinityPriority (plugin InterPodAffinity, score part): preferred pod affinity and
anti-affinity, both ways.

For every existing pod: its node's topology value of each of the incoming pod's preferred terms it
matches gains (affinity) or loses (anti-affinity) the term's weight; and each of the existing pod's
own preferred terms the incoming pod matches does the same, while its required affinity terms count
`hardPodAffinitySymmetricWeight`. A node scores the sum over its labels; scores are then scaled
between the lowest and the highest. Unless the pod has preferred terms of its own, only nodes
holding pods with affinity are looked at (Snapshot's index). The vectorised `score_nodes` sums the
same weights from NodeUsage's indexes: each distinct term of the placed pods is matched against
the pod once, and each of the pod's preferred terms once against each distinct label set its
selector allows, the pods it matches summed per domain over arrays.

namespaceSelector (1.32): the pod's preferred terms have theirs resolved into namespace names
against the Namespace objects; an existing pod's terms are matched against the labels of the
incoming pod's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kubesched.model.affinity import (
    AffinityTerm,
    PodAffinity,
    WeightedAffinityTerm,
    namespace_labels,
    parse_pod_affinity,
)
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podindex import PREFERRED_AFFINITY, PREFERRED_ANTI_AFFINITY, REQUIRED_AFFINITY
from kubesched.model.table import IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, PluginSettings, Priority
from kubesched.plugins.inter_pod_affinity.filtering import matching_pods

TopologyScore = dict[str, dict[str, int]]


def _process(
    scores: TopologyScore,
    term: AffinityTerm,
    weight: int,
    pod: Pod,
    labels: Mapping[str, str],
    ns_labels: Mapping[str, str] | None = None,
) -> None:
    """processTerm: `pod` (its namespace labelled `ns_labels`) matching `term` adds `weight` at the
    fixed node's topology value."""
    if not labels:
        return
    value = labels.get(term.topology_key)
    if value is not None and term.matches(pod, ns_labels):
        by_value = scores.setdefault(term.topology_key, {})
        by_value[value] = by_value.get(value, 0) + weight


def _process_weighted(
    scores: TopologyScore,
    terms: Sequence[WeightedAffinityTerm],
    pod: Pod,
    labels: Mapping[str, str],
    sign: int,
    ns_labels: Mapping[str, str] | None = None,
) -> None:
    for weighted in terms:
        _process(scores, weighted.term, weighted.weight * sign, pod, labels, ns_labels)


class InterPodAffinityPriority(Priority):
    name = "InterPodAffinityPriority"
    plugin = "InterPodAffinity"

    def __init__(self, hard_pod_affinity_weight: int = 1) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> InterPodAffinityPriority:
        return cls(settings.hard_pod_affinity_symmetric_weight)

    def _existing(
        self,
        scores: TopologyScore,
        incoming: PodAffinity,
        existing: PodAffinity,
        node: NodeInfo,
        ns_labels: Mapping[str, str],
    ) -> None:
        """processExistingPod; `ns_labels`: the labels of the incoming pod's namespace."""
        labels = node.node.labels
        pod = incoming.pod
        # The incoming pod's terms have their namespaceSelector resolved: no labels needed.
        _process_weighted(scores, incoming.preferred_affinity, existing.pod, labels, 1)
        _process_weighted(scores, incoming.preferred_anti_affinity, existing.pod, labels, -1)
        if self.hard_pod_affinity_weight > 0:
            for term in existing.required_affinity:
                _process(scores, term, self.hard_pod_affinity_weight, pod, labels, ns_labels)
        _process_weighted(scores, existing.preferred_affinity, pod, labels, 1, ns_labels)
        _process_weighted(scores, existing.preferred_anti_affinity, pod, labels, -1, ns_labels)

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        namespaces = snapshot.objects.namespaces
        incoming = parse_pod_affinity(pod).with_namespaces(namespaces)
        ns_labels = namespace_labels(namespaces, pod.namespace)
        scores: TopologyScore = {}
        if incoming.preferred_affinity or incoming.preferred_anti_affinity:
            # Every existing pod may match the pod's preferred terms.
            for node in snapshot.nodes:
                with_affinity = {p.pod.uid: p for p in node.pods_with_affinity}
                for existing in node.pods.values():
                    info = with_affinity.get(existing.uid) or PodAffinity(existing)
                    self._existing(scores, incoming, info, node, ns_labels)
        else:
            for node in snapshot.nodes_with_pod_affinity():
                for info in node.pods_with_affinity:
                    self._existing(scores, incoming, info, node, ns_labels)
        return scores

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        if not state:
            return 0
        labels = node.node.labels
        total = 0
        for key, by_value in state.items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        if not state:
            return
        max_count = max(0, max(scores, default=0))
        min_count = min(0, min(scores, default=0))
        diff = max_count - min_count
        for i, score in enumerate(scores):
            f_score = 0.0
            if diff > 0:
                f_score = float(MAX_NODE_SCORE) * (float(score - min_count) / float(diff))
            scores[i] = int(f_score)

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        namespaces = snapshot.objects.namespaces
        incoming = snapshot.parsed(pod, parse_pod_affinity).with_namespaces(namespaces)
        ns_labels = namespace_labels(namespaces, pod.namespace)
        per_node = np.zeros(table.count, dtype=np.int64)  # the weights the pods on each node add
        state: TopologyScore = {}  # the placed pods' terms that match the pod, by key and value
        for weighted, sign in (
            *((w, 1) for w in incoming.preferred_affinity),
            *((w, -1) for w in incoming.preferred_anti_affinity),
        ):
            weights = matching_pods(table, (weighted.term,)) * (weighted.weight * sign)
            per_node += table.columns.domain_totals(weighted.term.topology_key, weights)
        for (role, weight, term), on_rows in table.usage.placed_terms(pod.labels):
            if role == REQUIRED_AFFINITY:
                weight = self.hard_pod_affinity_weight
                if weight <= 0:
                    continue
            elif role == PREFERRED_ANTI_AFFINITY:
                weight = -weight
            elif role != PREFERRED_AFFINITY:
                continue
            if weight and term.matches(pod, ns_labels):
                _add_on_rows(state, term.topology_key, weight, on_rows, table)
        totals = per_node[rows]
        for key, by_value in state.items():
            codes, values = table.columns.label_codes(key)
            positions = table.columns.value_codes(key)
            # Index -1 (no such label) reads the trailing 0.
            lookup = np.zeros(len(values) + 1, dtype=np.int64)
            lookup[[positions[v] for v in by_value]] = list(by_value.values())
            totals += lookup[codes[rows]]
        max_count = max(0, int(totals.max()))
        min_count = min(0, int(totals.min()))
        diff = max_count - min_count
        if diff <= 0:
            return np.zeros(len(rows), dtype=np.int64)
        scaled: IntArray = (
            float(MAX_NODE_SCORE) * ((totals - min_count).astype(np.float64) / float(diff))
        ).astype(np.int64)
        return scaled


def _add_on_rows(
    scores: TopologyScore, key: str, weight: int, on_rows: Mapping[int, int], table: NodeTable
) -> None:
    """`weight` for each pod of `on_rows` (pods per node row), at its node's value of `key`."""
    nodes = table.columns.nodes
    by_value = scores.setdefault(key, {})
    for row, count in on_rows.items():
        value = nodes[row].labels.get(key)
        if value is not None:
            by_value[value] = by_value.get(value, 0) + weight * count
