"""Nodes whose object could not be parsed are never chosen (our addition; kube-scheduler's typed
client would have rejected such an object before the scheduler saw it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Pod
from kubesched.plugins.framework import FITS, Predicate

ERR_REASON_INVALID_NODE = "node(s) had invalid spec or status"


class ValidNode(Predicate):
    """Always runs first; the node's own `parse_error` says what exactly is wrong."""

    name = "ValidNode"
    unresolvable_reasons = frozenset({ERR_REASON_INVALID_NODE})

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        return (ERR_REASON_INVALID_NODE,) if node.node.parse_error is not None else FITS
