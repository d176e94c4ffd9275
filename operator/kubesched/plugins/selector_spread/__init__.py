"""SelectorSpread (kube-scheduler 1.20 pkg/scheduler/framework/plugins/selectorspread/).

Priority SelectorSpreadPriority, alias ServiceSpreadingPriority, with the DefaultPodTopologySpread
gate off: the pods of one Service or controller spread over nodes and zones.
"""

from __future__ import annotations

from kubesched.plugins.declare import priority, register
from kubesched.plugins.selector_spread.scoring import SelectorSpreadPriority

register(
    priority(
        SelectorSpreadPriority,
        aliases=("ServiceSpreadingPriority",),
        default_weight=1,
        summary=(
            "Spreads the pods of a Service, ReplicaSet, StatefulSet or "
            "ReplicationController over nodes and zones."
        ),
    ),
)

__all__ = ["SelectorSpreadPriority"]
