"""ServiceAntiAffinity (plugin ServiceAffinity, score part): custom priorities with a
`serviceAntiAffinity` argument spread the pods of the pod's first Service over the values of a
node label (a zone, a rack).

A node's raw score is the number of the Service's pods (same namespace, not terminating) it runs;
for each label, a node having it scores 100 * (all such pods - those in its label value's domain)
/ all such pods (100 when there are none), a node without it 0; the labels' scores are averaged.
Every such entry feeds one priority, weighted by the common weight times the number of entries,
as 1.20 configures one ServiceAffinity plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import LabelSelector
from kubesched.model.shape import known_fields, string
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority
from kubesched.plugins.helper import pod_services


class ServiceAntiAffinityPriority(Priority):
    name = "ServiceAntiAffinity"
    plugin = "ServiceAffinity"
    weight_rule = "sum"

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = tuple(labels)

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> ServiceAntiAffinityPriority:
        """One entry's `serviceAntiAffinity`: {"label": "..."}."""
        known_fields(argument, ("label",))
        return cls((string(argument.get("label"), "label"),))

    def merge(self, other: Priority) -> Priority:
        assert isinstance(other, ServiceAntiAffinityPriority)
        return ServiceAntiAffinityPriority(self.labels + other.labels)

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        services = pod_services(pod, snapshot.objects)
        if not services:
            return None
        selector = LabelSelector.from_map((services[0].get("spec") or {}).get("selector") or {})
        return None if selector.empty else selector

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        if state is None:
            return 0
        return sum(
            1
            for other in node.pods.values()
            if other.namespace == pod.namespace and not other.deleting and state.matches(other.labels)
        )

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        reduced = [0.0] * len(scores)
        total_pods = sum(scores)
        for label in self.labels:
            # updateNodeScoresForLabel
            per_value: dict[str, int] = {}
            values: list[str | None] = []
            for node, count in zip(nodes, scores, strict=True):
                value = node.node.labels.get(label)
                values.append(value)
                if value is not None:
                    per_value[value] = per_value.get(value, 0) + count
            for i, value in enumerate(values):
                if value is None:
                    continue
                f_score = float(MAX_NODE_SCORE)
                if total_pods > 0:
                    f_score = float(MAX_NODE_SCORE) * (
                        float(total_pods - per_value[value]) / float(total_pods)
                    )
                reduced[i] += f_score / float(len(self.labels))
        scores[:] = [int(s) for s in reduced]
