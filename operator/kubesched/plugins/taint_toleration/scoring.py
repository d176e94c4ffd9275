"""TaintTolerationPriority (plugin TaintToleration, score part): fewer PreferNoSchedule taints the
pod does not tolerate is better; counts scaled by the worst node and reversed, so a node with none
scores 100."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority
from kubesched.plugins.helper import default_normalize, default_normalize_array

PREFER_NO_SCHEDULE = "PreferNoSchedule"


class TaintTolerationPriority(Priority):
    name = "TaintTolerationPriority"
    plugin = "TaintToleration"

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        # getAllTolerationPreferNoSchedule: tolerations without an effect apply to every effect.
        return tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        count = 0
        for taint in node.node.taints:
            if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in state):
                count += 1
        return count

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        default_normalize(scores, MAX_NODE_SCORE, reverse=True)

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        tolerations = self.prescore(pod, snapshot, nodes)
        # One count per distinct set of taints.
        counts = np.array(
            [
                sum(
                    1
                    for t in taints
                    if t.effect == PREFER_NO_SCHEDULE and not any(x.tolerates(t) for x in tolerations)
                )
                for taints in table.columns.taint_sets
            ],
            dtype=np.int64,
        )
        return default_normalize_array(counts[table.columns.taint_set[rows]], MAX_NODE_SCORE, reverse=True)
