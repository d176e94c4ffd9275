"""NodeAffinity (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodeaffinity/).

Predicate MatchNodeSelector: spec.nodeSelector and the required node affinity. Priority
NodeAffinityPriority: the weights of the preferred terms a node matches.

Reason: ERR_REASON_NODE_AFFINITY (no eviction helps).
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.node_affinity.filtering import (
    ERR_REASON_NODE_AFFINITY,
    MatchNodeSelector,
)
from kubesched.plugins.node_affinity.scoring import NodeAffinityPriority

register(
    predicate(
        MatchNodeSelector,
        order=5,
        framework="NodeAffinity",
        summary="The node matches `spec.nodeSelector` and the required node affinity.",
    ),
    priority(
        NodeAffinityPriority,
        framework="NodeAffinity",
        default_weight=1,
        summary="The weights of the preferred node affinity terms the node matches.",
    ),
)

__all__ = [
    "ERR_REASON_NODE_AFFINITY",
    "MatchNodeSelector",
    "NodeAffinityPriority",
]
