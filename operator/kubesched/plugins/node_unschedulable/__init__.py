"""NodeUnschedulable (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodeunschedulable/).

Predicate CheckNodeUnschedulable (mandatory): cordoned nodes, unless the pod tolerates it.

Reason: ERR_REASON_UNSCHEDULABLE (no eviction helps).
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.node_unschedulable.filtering import (
    ERR_REASON_UNSCHEDULABLE,
    CheckNodeUnschedulable,
)

register(
    predicate(
        CheckNodeUnschedulable,
        order=1,
        framework="NodeUnschedulable",
        default=True,
        mandatory=True,
        summary="A cordoned node (`spec.unschedulable`) takes only pods that tolerate it.",
    ),
)

__all__ = [
    "ERR_REASON_UNSCHEDULABLE",
    "CheckNodeUnschedulable",
]
