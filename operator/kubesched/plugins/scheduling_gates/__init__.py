"""SchedulingGates (kube-scheduler 1.32 `pkg/scheduler/framework/plugins/schedulinggates`): a pod
with `spec.schedulingGates` does not enter the scheduling queue until the last gate is removed.

Runs before the queue (PreEnqueue), not as a predicate: a gated pod never reaches the algorithm.
"""

from __future__ import annotations

from kubesched.plugins.scheduling_gates.pre_enqueue import (
    GATED_BIND_CONFLICT,
    GATED_CONDITION_MESSAGE,
    NAME,
    REASON_SCHEDULING_GATED,
    pre_enqueue,
)

__all__ = [
    "GATED_BIND_CONFLICT",
    "GATED_CONDITION_MESSAGE",
    "NAME",
    "REASON_SCHEDULING_GATED",
    "pre_enqueue",
]
