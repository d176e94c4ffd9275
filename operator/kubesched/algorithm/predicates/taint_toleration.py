"""PodToleratesNodeTaints (plugin TaintToleration, filter part): NoSchedule and NoExecute taints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.algorithm.framework import FITS, Predicate
from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Pod, Taint

_FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def err_reason_untolerated(taint: Taint) -> str:
    """The reason names the first taint not tolerated, as 1.20 does."""
    return f"node(s) had taint {{{taint.key}: {taint.value}}}, that the pod didn't tolerate"


class PodToleratesNodeTaints(Predicate):
    name = "PodToleratesNodeTaints"

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        for taint in node.node.taints:
            if taint.effect in _FILTERED_EFFECTS and not any(t.tolerates(taint) for t in pod.tolerations):
                return (err_reason_untolerated(taint),)
        return FITS
