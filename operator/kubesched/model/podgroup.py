"""PodGroups: gangs of pods placed all or nothing, as scheduler-plugins' coscheduling defines them.

The API is `scheduling.x-k8s.io/v1alpha1` `PodGroup` (apis/scheduling/v1alpha1/types.go): `spec`
has `minMember`, `minResources` and `scheduleTimeoutSeconds`. A pod joins a group with the label
`scheduling.x-k8s.io/pod-group: <name>` (the older `pod-group.scheduling.sigs.k8s.io` too), in the
group's namespace. Pure: parsing and the status a group's members add up to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod, parse_time
from kubesched.model.quantity import QuantityError
from kubesched.model.resources import ZERO, Resource, resource_from_list

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
LEGACY_POD_GROUP_LABEL: Final = "pod-group.scheduling.sigs.k8s.io"

# Phases, with the meanings of coscheduling's newest release.
PENDING: Final = "Pending"  # accepted, not yet placed (too few members, or they do not fit)
SCHEDULING: Final = "Scheduling"  # minMember placed, fewer than minMember running yet
RUNNING: Final = "Running"  # minMember running (or finished)
FINISHED: Final = "Finished"  # minMember succeeded
FAILED: Final = "Failed"  # a member failed after minMember had started
UNKNOWN: Final = "Unknown"  # some but not minMember placed: a member lost its place, or a failover


def group_label(pod: Pod) -> str:
    """The label that names the PodGroup `pod` belongs to (the current one first), or ""."""
    for label in (POD_GROUP_LABEL, LEGACY_POD_GROUP_LABEL):
        if pod.labels.get(label):
            return label
    return ""


def group_name(pod: Pod) -> str:
    """The name of the PodGroup `pod` belongs to, or "" when it belongs to none."""
    label = group_label(pod)
    return pod.labels[label] if label else ""


def group_key(pod: Pod) -> str:
    """`namespace/name` of the pod's PodGroup, or "" when it belongs to none."""
    name = group_name(pod)
    return f"{pod.namespace}/{name}" if name else ""


def bound_members(snapshot: Snapshot, key: str) -> list[Pod]:
    """The group's members on the snapshot's nodes (bound, assumed or placed earlier in the batch)."""
    return [
        pod
        for info in snapshot.nodes
        for pod in info.pods.values()
        if not pod.deleting and group_key(pod) == key
    ]


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A PodGroup's spec. `error` says what is wrong with one that cannot be used as written."""

    namespace: str
    name: str
    uid: str = ""
    min_member: int = 1
    min_resources: Resource = ZERO
    min_resources_raw: Mapping[str, Any] = field(default_factory=dict)
    schedule_timeout_seconds: int | None = None
    created: datetime = field(default_factory=lambda: parse_time(None))  # the epoch when unknown
    error: str = ""
    final: bool = False  # its status says Finished or Failed: as coscheduling's, the phase then stays

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_group_from_dict(obj: Mapping[str, Any]) -> PodGroup:
    """Parse a PodGroup; what cannot be used goes into `error`, never an exception."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    errors: list[str] = []
    # The CRD's schema rules these out; a snapshot file or a schemaless CRD does not.
    if not isinstance(meta, Mapping):
        meta = {}
    if not isinstance(spec, Mapping):
        errors.append("spec must be an object")
        spec = {}
    raw_min = spec.get("minMember", 0)
    min_member = raw_min if isinstance(raw_min, int) and not isinstance(raw_min, bool) else 0
    if min_member < 1:
        # A cluster with scheduler-plugins' CRD admits 0 (its schema has no minimum); ours does not.
        errors.append(f"spec.minMember must be at least 1, got {raw_min!r}")
    raw_resources = spec.get("minResources") or {}
    min_resources = ZERO
    if not isinstance(raw_resources, Mapping):
        errors.append("spec.minResources must be a map of resource names to quantities")
        raw_resources = {}
    else:
        try:
            min_resources = resource_from_list(raw_resources)
        except (QuantityError, TypeError, ValueError) as exc:
            errors.append(f"spec.minResources: {exc}")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0):
        errors.append(f"spec.scheduleTimeoutSeconds must be a non-negative integer, got {timeout!r}")
        timeout = None
    created = meta.get("creationTimestamp")
    status = obj.get("status")
    final = isinstance(status, Mapping) and status.get("phase") in (FINISHED, FAILED)
    return PodGroup(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        min_member=min_member,
        min_resources=min_resources,
        min_resources_raw=dict(raw_resources),
        schedule_timeout_seconds=timeout,
        created=parse_time(created if isinstance(created, str) else None),
        error="; ".join(errors),
        final=final,
    )


@dataclass(frozen=True, slots=True)
class MemberCounts:
    """What a group's members add up to (coscheduling's status counters, plus `scheduled`)."""

    exist: int = 0  # members not yet terminated, bound or not
    scheduled: int = 0  # bound (or being bound) and not terminated
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    @property
    def placed(self) -> int:
        """Members bound now or once: a finished member was placed and ran."""
        return self.scheduled + self.succeeded + self.failed


def count_members(pods: Iterable[Pod]) -> MemberCounts:
    """Count a group's member pods; terminated ones count as succeeded or failed only."""
    exist = scheduled = running = succeeded = failed = 0
    for pod in pods:
        if pod.phase == "Succeeded":
            succeeded += 1
        elif pod.phase == "Failed":
            failed += 1
        elif not pod.deleting:
            exist += 1
            if pod.node_name:
                scheduled += 1
            if pod.phase == "Running":
                running += 1
    return MemberCounts(exist, scheduled, running, succeeded, failed)


def phase(group: PodGroup, counts: MemberCounts, ever_placed: bool) -> str:
    """The group's phase. `ever_placed`: minMember members were bound at some point (the phase
    then says Unknown, not Pending, when members lose their places)."""
    need = max(group.min_member, 1)
    if counts.succeeded >= need:
        return FINISHED
    if counts.failed and counts.failed + counts.running + counts.succeeded >= need:
        return FAILED
    if counts.running + counts.succeeded >= need:
        return RUNNING
    if counts.scheduled + counts.succeeded >= need:
        return SCHEDULING
    if counts.scheduled > 0 or ever_placed:
        return UNKNOWN
    return PENDING


def occupied_by(pods: Iterable[Pod]) -> str:
    """coscheduling's `occupiedBy`: the members' owners, `namespace/name`, sorted and comma-joined."""
    refs = sorted({f"{pod.namespace}/{owner.name}" for pod in pods for owner in pod.owners})
    return ",".join(refs)


__all__ = [
    "FAILED",
    "FINISHED",
    "LEGACY_POD_GROUP_LABEL",
    "PENDING",
    "POD_GROUP_LABEL",
    "RUNNING",
    "SCHEDULING",
    "UNKNOWN",
    "MemberCounts",
    "PodGroup",
    "bound_members",
    "count_members",
    "group_key",
    "group_label",
    "group_name",
    "occupied_by",
    "phase",
    "pod_group_from_dict",
]
