"""PodTopologySpread (kube-scheduler 1.20 pkg/scheduler/framework/plugins/podtopologyspread/).

Predicate EvenPodsSpread: DoNotSchedule topologySpreadConstraints. Priority EvenPodsSpreadPriority,
and SelectorSpreadPriority / ServiceSpreadingPriority with the DefaultPodTopologySpread gate on:
ScheduleAnyway constraints, or the system defaults.

Reasons: ERR_REASON_CONSTRAINTS_NOT_MATCH; ERR_REASON_NODE_LABEL_NOT_MATCH (no eviction helps).
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.pod_topology_spread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    EvenPodsSpread,
)
from kubesched.plugins.pod_topology_spread.scoring import PodTopologySpreadPriority

register(
    predicate(
        EvenPodsSpread,
        order=22,
        framework="PodTopologySpread",
        default=True,
        summary="`topologySpreadConstraints` with `whenUnsatisfiable: DoNotSchedule`.",
    ),
    priority(
        PodTopologySpreadPriority,
        framework="PodTopologySpread",
        default_weight=2,
        summary=(
            "`topologySpreadConstraints` with `whenUnsatisfiable: ScheduleAnyway`: "
            "favours the least crowded domains."
        ),
    ),
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "EvenPodsSpread",
    "PodTopologySpreadPriority",
]
