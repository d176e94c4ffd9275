"""MatchNodeSelector (plugin NodeAffinity, filter part): spec.nodeSelector AND the required node
affinity (terms ORed, expressions within a term ANDed; matchFields on metadata.name).

The pod's selectors are parsed once per cycle in `prefilter`; a term that does not parse never
matches (1.20's lazy-error node selector), the other terms still can.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import NodeSelector, SelectorError
from kubesched.model.table import BoolArray, NodeTable
from kubesched.plugins.framework import FITS, SKIP, Predicate

# Newer kube-scheduler's words (1.20 said "node selector"): the predicate checks both, and a pod
# may use either.
ERR_REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"

_MATCHES_NOTHING = NodeSelector(())


@dataclass(frozen=True, slots=True)
class NodeAffinityState:
    node_selector: tuple[tuple[str, str], ...]
    required: NodeSelector | None  # None: no required node affinity

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        return self.required is None or self.required.matches(labels, node_name)


def required_node_selector(pod: Pod) -> NodeSelector | None:
    """The pod's requiredDuringSchedulingIgnoredDuringExecution; present but empty matches nothing."""
    node_affinity = pod.affinity.get("nodeAffinity") if isinstance(pod.affinity, Mapping) else None
    if not isinstance(node_affinity, Mapping):
        return None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    try:
        return NodeSelector.parse(required)
    except SelectorError:
        return _MATCHES_NOTHING


def node_affinity_state(pod: Pod) -> NodeAffinityState | None:
    """What the pod asks of node labels, or None when it accepts every node."""
    required = required_node_selector(pod)
    if not pod.node_selector and required is None:
        return None
    selector = tuple((str(k), str(v)) for k, v in pod.node_selector.items())
    return NodeAffinityState(selector, required)


class MatchNodeSelector(Predicate):
    name = "MatchNodeSelector"
    unresolvable_reasons = frozenset({ERR_REASON_NODE_AFFINITY})

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        return snapshot.parsed(pod, node_affinity_state) or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return FITS if state.matches(node.node.labels, node.name) else (ERR_REASON_NODE_AFFINITY,)

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        matching = affinity_mask(state, table)
        return None if matching is None else ~matching


def affinity_mask(state: NodeAffinityState, table: NodeTable) -> BoolArray | None:
    """`state.matches` for every node, or None when it reads node names (matchFields)."""
    keys = set(k for k, _ in state.node_selector)
    if state.required is not None:
        for term in state.required.terms:
            if term.fields:
                return None
            if term.labels is not None:
                keys.update(r.key for r in term.labels.requirements)
    return table.columns.match_labels(sorted(keys), lambda labels: state.matches(labels, ""), state)
