"""NodeLabel (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodelabel/).

Predicate CheckNodeLabelPresence (custom predicates with a `labelsPresence` argument): labels a node
must have or lack. Priority NodeLabel (custom priorities with a `labelPreference` argument).

Reason: ERR_REASON_PRESENCE_VIOLATED (no eviction helps).
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.node_label.filtering import (
    ERR_REASON_PRESENCE_VIOLATED,
    CheckNodeLabelPresence,
)
from kubesched.plugins.node_label.scoring import NodeLabelPriority

register(
    predicate(
        CheckNodeLabelPresence,
        order=10,
        argument_key="labelsPresence",
        summary="The listed labels must exist (`presence: true`) or not on the node.",
    ),
    priority(
        NodeLabelPriority,
        argument_key="labelPreference",
        summary="Favours nodes that have (`presence: true`) or lack a label.",
    ),
)

__all__ = [
    "ERR_REASON_PRESENCE_VIOLATED",
    "CheckNodeLabelPresence",
    "NodeLabelPriority",
]
