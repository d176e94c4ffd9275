"""HostName (plugin NodeName): a pod naming a node in spec.nodeName fits that node only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import BoolArray, NodeTable
from kubesched.plugins.framework import FITS, SKIP, Predicate

ERR_REASON_HOSTNAME = "node(s) didn't match the requested hostname"


class HostName(Predicate):
    name = "HostName"
    unresolvable_reasons = frozenset({ERR_REASON_HOSTNAME})

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        return pod.node_name or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return FITS if node.name == state else (ERR_REASON_HOSTNAME,)

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        fails = np.ones(table.count, dtype=np.bool_)
        i = table.columns.index.get(state)
        if i is not None:
            fails[i] = False
        return fails
