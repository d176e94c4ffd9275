"""NodePreferAvoidPodsPriority (plugin NodePreferAvoidPods): a node whose
`scheduler.alpha.kubernetes.io/preferAvoidPods` annotation names the pod's controlling
ReplicationController or ReplicaSet scores 0, every other node 100. Pods without such a
controller score 100 everywhere; an annotation that does not parse is ignored."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority

PREFER_AVOID_PODS_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
_AVOIDED_KINDS = ("ReplicationController", "ReplicaSet")


@functools.lru_cache(maxsize=1024)
def avoided_controllers(annotation: str) -> frozenset[tuple[str, str]]:
    """GetAvoidPodsFromNodeAnnotations: the (kind, uid) of the controllers the node asks to avoid."""
    try:
        parsed = json.loads(annotation)
        entries = parsed.get("preferAvoidPods") or []
        return frozenset(
            (
                str(e["podSignature"]["podController"].get("kind") or ""),
                str(e["podSignature"]["podController"].get("uid") or ""),
            )
            for e in entries
            if (e.get("podSignature") or {}).get("podController")
        )
    except (ValueError, TypeError, AttributeError, KeyError):
        return frozenset()


class NodePreferAvoidPodsPriority(Priority):
    name = "NodePreferAvoidPodsPriority"
    plugin = "NodePreferAvoidPods"

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        controller = next((o for o in pod.owners if o.controller), None)
        if controller is None or controller.kind not in _AVOIDED_KINDS:
            return None
        return (controller.kind, controller.uid)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        if state is None:
            return MAX_NODE_SCORE
        annotation = node.node.annotations.get(PREFER_AVOID_PODS_ANNOTATION)
        if annotation and state in avoided_controllers(annotation):
            return 0
        return MAX_NODE_SCORE

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        state = self.prescore(pod, snapshot, nodes)
        scores = np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        if state is None:
            return scores
        annotated = table.columns.annotated(PREFER_AVOID_PODS_ANNOTATION)[rows]
        for position in np.flatnonzero(annotated).tolist():
            scores[position] = self.score(pod, state, snapshot.nodes[int(rows[position])])
        return scores
