"""TaintTolerationPriority (plugin TaintToleration, score part): fewer PreferNoSchedule taints the
pod does not tolerate is better; counts scaled by the worst node and reversed, so a node with none
scores 100."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.algorithm.framework import MAX_NODE_SCORE, Priority
from kubesched.algorithm.helper import default_normalize
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod

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
