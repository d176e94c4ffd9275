"""CheckNodeUnschedulable (plugin NodeUnschedulable): cordoned nodes, unless the pod tolerates it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod, Taint
from kubesched.model.table import BoolArray, NodeTable
from kubesched.plugins.framework import FITS, SKIP, Predicate

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

# The taint a cordoned node is treated as having (v1.TaintNodeUnschedulable, NoSchedule).
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class CheckNodeUnschedulable(Predicate):
    name = "CheckNodeUnschedulable"
    unresolvable_reasons = frozenset({ERR_REASON_UNSCHEDULABLE})

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return SKIP
        return None

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return (ERR_REASON_UNSCHEDULABLE,) if node.node.unschedulable else FITS

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        return table.columns.unschedulable
