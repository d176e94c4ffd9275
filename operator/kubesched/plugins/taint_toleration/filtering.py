"""PodToleratesNodeTaints (plugin TaintToleration, filter part): NoSchedule and NoExecute taints;
and PodToleratesNodeNoExecuteTaints, NoExecute taints only.

1.20 refuses the name PodToleratesNodeNoExecuteTaints ("Predicate type not found"); it is kept
with the semantics of pkg/scheduler/algorithm/predicates in 1.17, the last release that had it,
including that release's reason, which names no taint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Pod, Taint
from kubesched.model.table import BoolArray, NodeTable
from kubesched.plugins.framework import FITS, Predicate

# ErrTaintsTolerationsNotMatch of 1.17 (pkg/scheduler/algorithm/predicates/error.go).
ERR_REASON_NOT_MATCH_1_17 = "node(s) had taints that the pod didn't tolerate"

# 1.20's reason for the first taint not tolerated: "node(s) had taint {k: v}, that the pod didn't tolerate".
_UNTOLERATED_PREFIX = "node(s) had taint {"
_UNTOLERATED_SUFFIX = "}, that the pod didn't tolerate"

_FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_NO_EXECUTE = frozenset({"NoExecute"})


def err_reason_untolerated(taint: Taint) -> str:
    """The reason names the first taint not tolerated, as 1.20 does."""
    return f"{_UNTOLERATED_PREFIX}{taint.key}: {taint.value}{_UNTOLERATED_SUFFIX}"


def first_untolerated(pod: Pod, node: NodeInfo, effects: frozenset[str]) -> Taint | None:
    """FindMatchingUntoleratedTaint over the node's taints with one of `effects`."""
    return first_untolerated_of(pod, node.node.taints, effects)


def first_untolerated_of(pod: Pod, taints: Sequence[Taint], effects: frozenset[str]) -> Taint | None:
    for taint in taints:
        if taint.effect in effects and not any(t.tolerates(taint) for t in pod.tolerations):
            return taint
    return None


def untolerated_nodes(pod: Pod, table: NodeTable, effects: frozenset[str]) -> BoolArray:
    """The nodes with a taint of `effects` the pod does not tolerate, judged once per set of taints."""
    columns = table.columns
    if len(columns.taint_sets) == 1:  # no node has taints
        return np.zeros(table.count, dtype=np.bool_)
    verdicts = np.array(
        [first_untolerated_of(pod, taints, effects) is not None for taints in columns.taint_sets],
        dtype=np.bool_,
    )
    fails: BoolArray = verdicts[columns.taint_set]
    return fails


class PodToleratesNodeTaints(Predicate):
    name = "PodToleratesNodeTaints"

    @classmethod
    def is_unresolvable(cls, reason: str) -> bool:
        """Every untolerated taint: evicting pods removes no taint."""
        return reason.startswith(_UNTOLERATED_PREFIX) and reason.endswith(_UNTOLERATED_SUFFIX)

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        taint = first_untolerated(pod, node, _FILTERED_EFFECTS)
        return FITS if taint is None else (err_reason_untolerated(taint),)

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        return untolerated_nodes(pod, table, _FILTERED_EFFECTS)


class PodToleratesNodeNoExecuteTaints(Predicate):
    name = "PodToleratesNodeNoExecuteTaints"
    unresolvable_reasons = frozenset({ERR_REASON_NOT_MATCH_1_17})

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        taint = first_untolerated(pod, node, _NO_EXECUTE)
        return FITS if taint is None else (ERR_REASON_NOT_MATCH_1_17,)

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        return untolerated_nodes(pod, table, _NO_EXECUTE)
