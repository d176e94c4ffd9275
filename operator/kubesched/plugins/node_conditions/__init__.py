"""Node conditions read directly: no 1.20 plugin. kube-scheduler 1.16's
pkg/scheduler/algorithm/predicates/predicates.go, the last release that had all four; 1.20 refuses
the names and relies on TaintNodesByCondition's taints instead.

Predicates CheckNodeCondition, CheckNodeMemoryPressure, CheckNodeDiskPressure, CheckNodePIDPressure.

Reasons (1.16's error.go, none of which an eviction helps): ERR_REASON_NOT_READY,
ERR_REASON_NETWORK_UNAVAILABLE, ERR_REASON_UNSCHEDULABLE (NodeUnschedulable's), ERR_REASON_MEMORY_PRESSURE,
ERR_REASON_DISK_PRESSURE, ERR_REASON_PID_PRESSURE.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.node_conditions.filtering import (
    ERR_REASON_DISK_PRESSURE,
    ERR_REASON_MEMORY_PRESSURE,
    ERR_REASON_NETWORK_UNAVAILABLE,
    ERR_REASON_NOT_READY,
    ERR_REASON_PID_PRESSURE,
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
)
from kubesched.plugins.node_unschedulable.filtering import ERR_REASON_UNSCHEDULABLE

register(
    predicate(
        CheckNodeCondition,
        order=0,
        refused_by_1_20=True,
        summary=(
            "The node is `Ready`, its network available, and it is not cordoned "
            "(older releases; taints replaced it)."
        ),
    ),
    predicate(
        CheckNodeMemoryPressure,
        order=19,
        refused_by_1_20=True,
        summary="BestEffort pods stay off a node under memory pressure (older releases).",
    ),
    predicate(
        CheckNodePIDPressure,
        order=20,
        refused_by_1_20=True,
        summary="No pod goes to a node under PID pressure (older releases).",
    ),
    predicate(
        CheckNodeDiskPressure,
        order=21,
        refused_by_1_20=True,
        summary="No pod goes to a node under disk pressure (older releases).",
    ),
)

__all__ = [
    "ERR_REASON_DISK_PRESSURE",
    "ERR_REASON_MEMORY_PRESSURE",
    "ERR_REASON_NETWORK_UNAVAILABLE",
    "ERR_REASON_NOT_READY",
    "ERR_REASON_PID_PRESSURE",
    "ERR_REASON_UNSCHEDULABLE",
    "CheckNodeCondition",
    "CheckNodeDiskPressure",
    "CheckNodeMemoryPressure",
    "CheckNodePIDPressure",
]
