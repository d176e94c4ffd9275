"""CheckNodeCondition, CheckNodeMemoryPressure, CheckNodeDiskPressure, CheckNodePIDPressure: node
conditions read directly, as kube-scheduler did before taints replaced them.

kube-scheduler 1.20 refuses these names ("Predicate type not found for ..."): the
TaintNodesByCondition taints (node.kubernetes.io/not-ready, .../memory-pressure, ...) and the
mandatory PodToleratesNodeTaints do their job. They are kept here, for policies that still name
them, with the semantics of pkg/scheduler/algorithm/predicates in 1.16, the last release that
had all four (1.17 removed them), and that release's failure reasons (algorithm/predicates/error.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quantity import QuantityError, parse_quantity
from kubesched.plugins.framework import FITS, SKIP, Predicate
from kubesched.plugins.node_unschedulable.filtering import ERR_REASON_UNSCHEDULABLE

ERR_REASON_NOT_READY = "node(s) were not ready"
ERR_REASON_NETWORK_UNAVAILABLE = "node(s) had unavailable network"
ERR_REASON_MEMORY_PRESSURE = "node(s) had memory pressure"
ERR_REASON_DISK_PRESSURE = "node(s) had disk pressure"
ERR_REASON_PID_PRESSURE = "node(s) had pid pressure"

_QOS_RESOURCES = ("cpu", "memory")


def condition_status(node: NodeInfo, kind: str) -> str:
    """The status of the node's condition `kind` ("True", "False", "Unknown"), "" when it has none."""
    for condition in node.node.raw_status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status") or "")
    return ""


def _non_zero(amounts: Any) -> bool:
    if not isinstance(amounts, Mapping):
        return False
    for name in _QOS_RESOURCES:
        if name in amounts:
            try:
                if parse_quantity(amounts[name]) != 0:
                    return True
            except QuantityError:
                return True
    return False


def is_best_effort(pod: Pod) -> bool:
    """GetPodQOS(pod) == BestEffort: no container or init container requests or limits cpu or memory."""
    for container in (*(pod.spec.get("containers") or ()), *(pod.spec.get("initContainers") or ())):
        resources = (container.get("resources") or {}) if isinstance(container, Mapping) else {}
        if _non_zero(resources.get("requests")) or _non_zero(resources.get("limits")):
            return False
    return True


class CheckNodeCondition(Predicate):
    """Ready must be True and NetworkUnavailable False where reported; cordoned nodes fail too.

    Every reason found is returned, as 1.16 did.
    """

    name = "CheckNodeCondition"
    unresolvable_reasons = frozenset(
        {ERR_REASON_NOT_READY, ERR_REASON_NETWORK_UNAVAILABLE, ERR_REASON_UNSCHEDULABLE}
    )

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        reasons = []
        for condition in node.node.raw_status.get("conditions") or ():
            if not isinstance(condition, Mapping):
                continue
            kind, status = condition.get("type"), condition.get("status")
            if kind == "Ready" and status != "True":
                reasons.append(ERR_REASON_NOT_READY)
            elif kind == "NetworkUnavailable" and status != "False":
                reasons.append(ERR_REASON_NETWORK_UNAVAILABLE)
        if node.node.unschedulable:
            reasons.append(ERR_REASON_UNSCHEDULABLE)
        return reasons or FITS


class CheckNodeMemoryPressure(Predicate):
    """Only BestEffort pods are kept off a node under memory pressure."""

    name = "CheckNodeMemoryPressure"
    unresolvable_reasons = frozenset({ERR_REASON_MEMORY_PRESSURE})

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        return None if is_best_effort(pod) else SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return (ERR_REASON_MEMORY_PRESSURE,) if condition_status(node, "MemoryPressure") == "True" else FITS


class CheckNodeDiskPressure(Predicate):
    name = "CheckNodeDiskPressure"
    unresolvable_reasons = frozenset({ERR_REASON_DISK_PRESSURE})

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return (ERR_REASON_DISK_PRESSURE,) if condition_status(node, "DiskPressure") == "True" else FITS


class CheckNodePIDPressure(Predicate):
    name = "CheckNodePIDPressure"
    unresolvable_reasons = frozenset({ERR_REASON_PID_PRESSURE})

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return (ERR_REASON_PID_PRESSURE,) if condition_status(node, "PIDPressure") == "True" else FITS
