"""NodePreferAvoidPods (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodepreferavoidpods/).

Priority NodePreferAvoidPodsPriority: nodes whose preferAvoidPods annotation names the pod's
controller score 0.
"""

from __future__ import annotations

from kubesched.plugins.declare import priority, register
from kubesched.plugins.node_prefer_avoid_pods.scoring import NodePreferAvoidPodsPriority

register(
    priority(
        NodePreferAvoidPodsPriority,
        default_weight=10000,
        summary=(
            "Avoids nodes whose `scheduler.alpha.kubernetes.io/preferAvoidPods` "
            "annotation names the pod's controller."
        ),
    ),
)

__all__ = ["NodePreferAvoidPodsPriority"]
