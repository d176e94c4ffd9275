"""TaintToleration (kube-scheduler 1.20 pkg/scheduler/framework/plugins/tainttoleration/).

Predicate PodToleratesNodeTaints (mandatory): NoSchedule and NoExecute taints; and
PodToleratesNodeNoExecuteTaints, NoExecute only, as 1.17 had it. Priority TaintTolerationPriority:
fewer untolerated PreferNoSchedule taints is better.

Reasons (no eviction helps): err_reason_untolerated(taint), naming the taint as 1.20 does;
ERR_REASON_NOT_MATCH_1_17.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.taint_toleration.filtering import (
    ERR_REASON_NOT_MATCH_1_17,
    PodToleratesNodeNoExecuteTaints,
    PodToleratesNodeTaints,
    err_reason_untolerated,
)
from kubesched.plugins.taint_toleration.scoring import TaintTolerationPriority

register(
    predicate(
        PodToleratesNodeTaints,
        order=8,
        framework="TaintToleration",
        default=True,
        mandatory=True,
        summary="The pod tolerates every `NoSchedule` and `NoExecute` taint of the node.",
    ),
    predicate(
        PodToleratesNodeNoExecuteTaints,
        order=9,
        refused_by_1_20=True,
        summary="The pod tolerates the node's `NoExecute` taints (older releases).",
    ),
    priority(
        TaintTolerationPriority,
        framework="TaintToleration",
        default_weight=1,
        summary="Fewer untolerated `PreferNoSchedule` taints is better.",
    ),
)

__all__ = [
    "ERR_REASON_NOT_MATCH_1_17",
    "PodToleratesNodeNoExecuteTaints",
    "PodToleratesNodeTaints",
    "TaintTolerationPriority",
    "err_reason_untolerated",
]
