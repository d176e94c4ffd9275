"""PreEnqueue of SchedulingGates (kube-scheduler 1.32 `schedulinggates/scheduling_gates.go`)."""

from __future__ import annotations

from typing import Final

from kubesched.model.objects import Pod

NAME: Final = "SchedulingGates"
# v1.PodReasonSchedulingGated, and the message the API server writes with it on create
# (`applySchedulingGatedCondition`, pkg/registry/core/pod/strategy.go).
REASON_SCHEDULING_GATED: Final = "SchedulingGated"
GATED_CONDITION_MESSAGE: Final = "Scheduling is blocked due to non-empty scheduling gates"
# The API server's 409 on binding a gated pod (BindingREST.setPodNodeAndMetadata).
GATED_BIND_CONFLICT: Final = "non-empty .spec.schedulingGates"


def pre_enqueue(pod: Pod) -> str | None:
    """Why `pod` may not enter the queue yet ("waiting for scheduling gates: [foo bar]"), None if it may."""
    if not pod.scheduling_gates:
        return None
    return f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]"
