"""CheckServiceAffinity (plugin ServiceAffinity, filter part): custom predicates with a
`serviceAffinity` argument keep the pods of a Service on nodes that agree on some labels.

The node must carry the values the pod's nodeSelector gives for those labels; for labels the
nodeSelector leaves open, when a Service selects the pod, the values of the node that runs the
first already placed pod of the same namespace matching all of the pod's labels. Every such
entry of a policy adds its labels to one filter, as 1.20 configures one ServiceAffinity plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.shape import known_fields
from kubesched.plugins.arguments import label_list
from kubesched.plugins.framework import FITS, SKIP, Predicate
from kubesched.plugins.helper import map_selects, pod_services

ERR_REASON_SERVICE_AFFINITY = "node(s) didn't match service affinity"


def first_peer_node_labels(pod: Pod, snapshot: Snapshot) -> Mapping[str, str] | None:
    """The labels of the node of the first pod, in snapshot order, of the pod's namespace whose
    labels include all of the pod's labels (createSelectorFromLabels; no labels: any pod)."""
    for node in snapshot.nodes:
        for other in node.pods.values():
            if other.namespace == pod.namespace and map_selects(pod.labels, other.labels):
                return node.node.labels
    return None


class CheckServiceAffinity(Predicate):
    name = "CheckServiceAffinity"
    pod_dependent = True
    requeue_on = frozenset({"Service"})

    def __init__(self, labels: Sequence[str] = ()) -> None:
        self.labels = tuple(labels)

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> CheckServiceAffinity:
        """One policy entry's `serviceAffinity`: {"labels": [...]}."""
        known_fields(argument, ("labels",))
        return cls(label_list(argument.get("labels"), "labels"))

    def merge(self, other: Predicate) -> Predicate:
        assert isinstance(other, CheckServiceAffinity)
        return CheckServiceAffinity(self.labels + other.labels)

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if not self.labels:
            return SKIP
        # findLabelsInSet: the affinity labels the pod's own nodeSelector pins down.
        wanted = {k: str(pod.node_selector[k]) for k in self.labels if k in pod.node_selector}
        if len(wanted) < len(self.labels) and pod_services(pod, snapshot.objects):
            peer = first_peer_node_labels(pod, snapshot)
            if peer is not None:
                for label in self.labels:
                    if label not in wanted and label in peer:
                        wanted[label] = peer[label]
        return tuple(wanted.items()) or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        labels = node.node.labels
        for key, value in state:
            if labels.get(key) != value:
                return (ERR_REASON_SERVICE_AFFINITY,)
        return FITS
