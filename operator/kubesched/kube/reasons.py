"""Every event reason and condition kubesched writes, with what each means.

The code writes these constants; the reference page (docs/reference/events.md) is generated from
EVENTS and CONDITIONS, so a reason added here is documented, and one written elsewhere is not:
add it here. SchedulingGated is the scheduling_gates plugin's, which the pure layers keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kubesched.plugins.scheduling_gates import REASON_SCHEDULING_GATED

# Event types.
NORMAL: Final = "Normal"
WARNING: Final = "Warning"

# Event reasons.
SCHEDULED: Final = "Scheduled"
FAILED_SCHEDULING: Final = "FailedScheduling"
PREEMPTED: Final = "Preempted"
IGNORED_QUOTA: Final = "IgnoredQuota"

# Pod conditions and their reasons.
POD_SCHEDULED: Final = "PodScheduled"
UNSCHEDULABLE: Final = "Unschedulable"
SCHEDULING_GATED: Final = REASON_SCHEDULING_GATED
DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"

# The PodGroup condition and its reasons (Unschedulable too).
GROUP_SCHEDULED: Final = "Scheduled"
PLACED: Final = "Placed"
WAITING_FOR_MEMBERS: Final = "WaitingForMembers"
SCHEDULE_TIMEOUT: Final = "ScheduleTimeout"
REPLACING: Final = "ReplacingMembers"

# SchedulerPolicy conditions and their reasons.
ACCEPTED: Final = "Accepted"
ACTIVE: Final = "Active"
VALID: Final = "Valid"
INVALID: Final = "Invalid"
IN_FORCE: Final = "InForce"
PREVIOUS_GENERATION_IN_FORCE: Final = "PreviousGenerationInForce"
SUPERSEDED: Final = "Superseded"
NOT_ACCEPTED: Final = "NotAccepted"
SHADOW: Final = "Shadow"


@dataclass(frozen=True, slots=True)
class EventReason:
    reason: str
    type: str
    kind: str  # of the object the event is about
    meaning: str


@dataclass(frozen=True, slots=True)
class ConditionReason:
    kind: str
    condition: str
    status: str
    reason: str
    meaning: str


EVENTS: Final = (
    EventReason(SCHEDULED, NORMAL, "Pod", "The pod was bound: `Successfully assigned NS/POD to NODE`."),
    EventReason(
        FAILED_SCHEDULING,
        WARNING,
        "Pod",
        "No node fits: `0/5 nodes are available: 3 Insufficient cpu, ...`, as kube-scheduler writes it; "
        "repeats are counted into one event.",
    ),
    EventReason(
        PREEMPTED, NORMAL, "Pod", "The pod is deleted to make room: `Preempted by NS/POD on node NODE`."
    ),
    EventReason(
        IGNORED_QUOTA,
        WARNING,
        "ElasticQuota",
        "A second ElasticQuota in a namespace that has one: only one quota per namespace is in force.",
    ),
)

CONDITIONS: Final = (
    ConditionReason(
        "Pod", POD_SCHEDULED, "False", UNSCHEDULABLE, "No node fits; the message is the FailedScheduling one."
    ),
    ConditionReason(
        "Pod",
        POD_SCHEDULED,
        "False",
        SCHEDULING_GATED,
        "The pod has `spec.schedulingGates`; no attempt is made.",
    ),
    ConditionReason(
        "Pod",
        DISRUPTION_TARGET,
        "True",
        PREEMPTION_BY_SCHEDULER,
        "Written on a preemption victim before it is deleted, as kube-scheduler 1.32 does.",
    ),
    ConditionReason("PodGroup", GROUP_SCHEDULED, "True", PLACED, "At least `minMember` members are placed."),
    ConditionReason(
        "PodGroup", GROUP_SCHEDULED, "False", WAITING_FOR_MEMBERS, "Fewer than `minMember` members exist."
    ),
    ConditionReason(
        "PodGroup",
        GROUP_SCHEDULED,
        "False",
        UNSCHEDULABLE,
        "Enough members exist but they do not fit together; the message says why.",
    ),
    ConditionReason(
        "PodGroup",
        GROUP_SCHEDULED,
        "False",
        SCHEDULE_TIMEOUT,
        "Not placed within `scheduleTimeoutSeconds`; the scheduler keeps trying.",
    ),
    ConditionReason(
        "PodGroup",
        GROUP_SCHEDULED,
        "False",
        REPLACING,
        "The group was placed once and lost members; they are being placed again.",
    ),
    ConditionReason("SchedulerPolicy", ACCEPTED, "True", VALID, "The current generation compiles."),
    ConditionReason(
        "SchedulerPolicy",
        ACCEPTED,
        "False",
        INVALID,
        "The current generation is refused; the message names the field.",
    ),
    ConditionReason("SchedulerPolicy", ACTIVE, "True", IN_FORCE, "This policy drives its scheduler name."),
    ConditionReason(
        "SchedulerPolicy",
        ACTIVE,
        "True",
        PREVIOUS_GENERATION_IN_FORCE,
        "The current generation is invalid; the last accepted one still drives its scheduler name.",
    ),
    ConditionReason(
        "SchedulerPolicy",
        ACTIVE,
        "False",
        SUPERSEDED,
        "An older policy with an accepted generation drives the same scheduler name.",
    ),
    ConditionReason(
        "SchedulerPolicy", ACTIVE, "False", NOT_ACCEPTED, "No generation of this policy was ever valid."
    ),
    ConditionReason(
        "SchedulerPolicy",
        ACTIVE,
        "False",
        SHADOW,
        "`spec.mode: Shadow`: evaluated beside the active policy, never in force.",
    ),
)
