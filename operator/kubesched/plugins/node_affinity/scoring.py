"""NodeAffinityPriority (plugin NodeAffinity, score part): the sum of the weights of the pod's
preferredDuringSchedulingIgnoredDuringExecution terms a node matches, scaled to 0..100 by the best
node. Terms of weight 0 or without any expression are ignored; so is a term that does not parse
(the API server refuses such pods; 1.20 would fail the cycle)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import NodeSelectorTerm
from kubesched.model.table import IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority
from kubesched.plugins.helper import default_normalize, default_normalize_array


def preferred_terms(pod: Pod) -> tuple[tuple[NodeSelectorTerm, int], ...]:
    """NewPreferredSchedulingTerms."""
    node_affinity = pod.affinity.get("nodeAffinity") if isinstance(pod.affinity, Mapping) else None
    if not isinstance(node_affinity, Mapping):
        return ()
    terms = []
    for raw in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        if not isinstance(raw, Mapping):
            continue
        weight = raw.get("weight") or 0
        preference = raw.get("preference") or {}
        if not isinstance(weight, int) or weight == 0 or not isinstance(preference, Mapping):
            continue
        if not preference.get("matchExpressions") and not preference.get("matchFields"):
            continue
        term = NodeSelectorTerm.parse(preference)
        if term.error is None:
            terms.append((term, weight))
    return tuple(terms)


class NodeAffinityPriority(Priority):
    name = "NodeAffinityPriority"
    plugin = "NodeAffinity"

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        return preferred_terms(pod)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        total = 0
        for term, weight in state:
            if term.matches(node.node.labels, node.name):
                total += weight
        return total

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        default_normalize(scores, MAX_NODE_SCORE, reverse=False)

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        totals = np.zeros(len(rows), dtype=np.int64)
        for term, weight in preferred_terms(pod):
            if term.fields:
                return None  # matchFields read node names: per node
            keys = sorted({r.key for r in term.labels.requirements} if term.labels is not None else set())
            matching = table.columns.match_labels(keys, _label_matcher(term), term)
            totals += np.where(matching[rows], weight, 0)
        return default_normalize_array(totals, MAX_NODE_SCORE, reverse=False)


def _label_matcher(term: NodeSelectorTerm) -> Callable[[Mapping[str, str]], bool]:
    return lambda labels: term.matches(labels, "")
