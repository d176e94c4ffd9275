"""What the scheduler knows of each PodGroup's members, and the status each group should show.

Fed by the pod watch (every member, whatever its scheduler name, bound or not) and by the
outcomes of the group's attempts. From these it gives the batch each group's `GangState`
(how many members exist, their scheduler names, whether it may hold nodes while it waits) and
the leader the `status` to write (phase and counters as coscheduling's controller computes them,
`scheduled`, `scheduleStartTime` and a `Scheduled` condition that says why a group waits).

Succeeded and failed members come from the watches of finished members (model/kinds.py
FINISHED_MEMBERS): the pod watch lists only pods that have not finished, and a member that finishes
leaves it as DELETED with its state from before. A finished member stays counted until one of
those watches sees it deleted; the pod watch's late word on it changes nothing. When that DELETED
comes first, the member is out of the counts until the other watch's event, a moment later.
Lives on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from kubesched.algorithm.gang import GangFitError, GangState
from kubesched.kube.reasons import (
    GROUP_SCHEDULED,
    PLACED,
    REPLACING,
    SCHEDULE_TIMEOUT,
    UNSCHEDULABLE,
    WAITING_FOR_MEMBERS,
)
from kubesched.model.objects import Pod
from kubesched.model.podgroup import (
    FAILED,
    FINISHED,
    PodGroup,
    count_members,
    group_key,
    group_label,
    occupied_by,
    phase,
    pod_group_from_dict,
)

# A group that has waited this long for room, with no scheduleTimeoutSeconds of its own, may
# hold the nodes its members fit on (when it is first in line).
DEFAULT_RESERVE_AFTER = 30.0


@dataclass(slots=True)
class _Record:
    """One group's history as the scheduler saw it."""

    members: dict[str, Pod] = field(default_factory=dict)  # uid -> latest version, terminated ones too
    started: float | None = None  # wall-clock time of its first attempt (scheduleStartTime)
    ever_placed: bool = False
    # The status that said Finished or Failed: as coscheduling's controller, the phase then stays,
    # whatever becomes of the members (a Job's cleanup deletes them).
    final: dict[str, Any] | None = None
    message: str = ""  # why its last attempt failed
    short: bool = False  # the last attempt failed for want of room (not of members or validity)
    transition: tuple[str, str] = ("", "")  # the condition's (status, reason) last written
    transitioned: float = 0.0


class GangTracker:
    """Every PodGroup member seen, by group; statuses to write, marked dirty as they change."""

    def __init__(
        self,
        groups: Callable[[str], PodGroup | None],
        clock: Callable[[], float] = time.time,
        assumed_on: Callable[[str], str | None] = lambda uid: None,
    ) -> None:
        self._groups = groups  # group key -> the PodGroup as the cache has it
        self._clock = clock
        # uid -> the node a pod is assumed on while its bind is under way: it counts as scheduled.
        self._assumed_on = assumed_on
        self._records: dict[str, _Record] = {}
        self._key_of: dict[str, str] = {}  # member uid -> group key
        self._dirty: set[str] = set()

    # --- what the watch handlers and the loop feed --------------------------------------------

    def tracks(self, uid: str) -> bool:
        return uid in self._key_of

    def observe(self, pod: Pod, *, deleted: bool = False) -> None:
        """A pod event. A deleted pod that had finished keeps counting as succeeded or failed."""
        known = self._member(pod.uid)
        if known is not None and _finished(known) and not _finished(pod):
            return  # the pod watch behind the watch of finished members: a pod never runs again
        key = group_key(pod)
        old = self._key_of.get(pod.uid)
        if old is not None and old != key:  # relabelled: it left its old group
            self._remove(old, pod.uid)
        if not key:
            return
        if deleted and not _finished(pod):
            self._remove(key, pod.uid)
            return
        record = self._records.setdefault(key, _Record())
        record.members[pod.uid] = pod
        self._key_of[pod.uid] = key
        self._dirty.add(key)
        if pod.node_name:
            self._latch(key, record)

    def drop(self, uid: str, *, finished: bool = False) -> None:
        """A member gone unseen (a watch gap). One that finished stays unless `finished`: the pod
        watch never lists it, only the watches of finished members can tell it is gone."""
        known = self._member(uid)
        if known is not None and (finished or not _finished(known)):
            self._remove(self._key_of[uid], uid)

    def finished_versions(self, label: str) -> dict[str, str]:
        """uid -> resourceVersion of the finished members whose group `label` names (those that
        label's watch of finished members lists)."""
        return {
            uid: pod.resource_version
            for record in self._records.values()
            for uid, pod in record.members.items()
            if _finished(pod) and group_label(pod) == label
        }

    def bound(self, uid: str, node_name: str) -> None:
        """Our own bind confirmed by the watch (its event is not parsed again)."""
        key = self._key_of.get(uid)
        record = self._records.get(key) if key else None
        if record is None or key is None or uid not in record.members:
            return
        pod = record.members[uid]
        if pod.node_name != node_name:
            record.members[uid] = replace(pod, node_name=node_name)
            self._dirty.add(key)
            self._latch(key, record)

    def group_changed(self, key: str) -> None:
        self._records.setdefault(key, _Record())
        self._dirty.add(key)

    def attempted(self, pods: Iterable[Pod], outcomes: Iterable[object]) -> None:
        """The outcomes of a batch: the groups it tried remember when, and why they wait."""
        for pod, outcome in zip(pods, outcomes, strict=True):
            key = group_key(pod)
            if not key:
                continue
            record = self._records.setdefault(key, _Record())
            if record.started is None:
                record.started = self._clock()
            error = _gang_error(outcome)
            if error is not None:
                record.message = error.summary()
                record.short = error.message.startswith("only ")
            elif not isinstance(outcome, Exception):
                record.message, record.short = "", False
            self._dirty.add(key)

    def mark_all_dirty(self) -> None:
        """Every group's status is due (a new leader writes them all once)."""
        self._dirty.update(self._records)

    def forget(self, key: str) -> None:
        """The PodGroup was deleted: its members, if any, wait for it (their pods keep the record)."""
        record = self._records.get(key)
        if record is not None and not record.members:
            del self._records[key]
        self._dirty.discard(key)

    # --- what the batch and the status writer read ----------------------------------------------

    def state(self, key: str) -> GangState:
        group = self._groups(key)
        record = self._records.get(key)
        members = [] if record is None else [p for p in record.members.values() if _alive(p)]
        pending = [p for p in members if not p.node_name]
        return GangState(
            group,
            len(members),
            frozenset(p.scheduler_name for p in pending),
            may_reserve=key == self._first_in_line(),
        )

    def states(self, pods: Iterable[Pod]) -> dict[str, GangState]:
        return {key: self.state(key) for key in {group_key(p) for p in pods} if key}

    def take_dirty(self) -> list[str]:
        """The groups whose status may have changed since last asked, and those whose timeout passed."""
        now = self._clock()
        for key, record in self._records.items():
            group = self._groups(key)
            timed_out = group is not None and self._timed_out(group, record, now)
            if timed_out and record.transition[1] != SCHEDULE_TIMEOUT:
                self._dirty.add(key)
        dirty, self._dirty = sorted(self._dirty), set()
        return dirty

    def status(self, key: str) -> dict[str, Any] | None:
        """The status the group should show, or None when there is no such PodGroup or it is invalid:
        the API server checks the whole object on a status write, so one our CRD's schema refuses
        (minMember 0, from scheduler-plugins' CRD) takes no status; its members' events say why.
        A group once Finished or Failed keeps that status."""
        group = self._groups(key)
        if group is None or group.error:
            return None
        record = self._records.setdefault(key, _Record())
        if record.final is not None:
            return record.final
        if group.final:
            return None  # written by an earlier leader; nothing changes it now
        members = [self._as_placed(pod) for pod in record.members.values()]
        counts = count_members(members)
        if counts.placed >= group.min_member:
            record.ever_placed = True
        now = self._clock()
        current = phase(group, counts, record.ever_placed)
        state, reason, message = self._condition(group, record, counts.exist, counts.placed, now)
        if (state, reason) != record.transition:
            record.transition, record.transitioned = (state, reason), now
        status: dict[str, Any] = {
            "phase": current,
            "scheduled": counts.scheduled,
            "running": counts.running,
            "succeeded": counts.succeeded,
            "failed": counts.failed,
            "conditions": [
                {
                    "type": GROUP_SCHEDULED,
                    "status": state,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": _rfc3339(record.transitioned),
                }
            ],
        }
        if record.started is not None:
            status["scheduleStartTime"] = _rfc3339(record.started)
        owners = occupied_by(members)
        if owners:
            status["occupiedBy"] = owners
        if current in (FINISHED, FAILED):
            record.final = status
        return status

    # --- internals --------------------------------------------------------------------------------

    def _condition(
        self, group: PodGroup, record: _Record, exist: int, placed: int, now: float
    ) -> tuple[str, str, str]:
        need = group.min_member
        if placed >= need:
            return "True", PLACED, f"{placed} members placed, minMember {need}"
        if record.ever_placed:
            return "False", REPLACING, f"{placed} of {need} members placed; the others are placed again"
        if exist < need:
            why = f"{exist} of {need} members exist"
        else:
            why = record.message or f"{exist} members exist; waiting for the scheduler"
        if self._timed_out(group, record, now):
            timeout = group.schedule_timeout_seconds
            return (
                "False",
                SCHEDULE_TIMEOUT,
                f"not placed within {timeout}s (scheduleTimeoutSeconds); still trying: {why}",
            )
        return "False", WAITING_FOR_MEMBERS if exist < need else UNSCHEDULABLE, why

    @staticmethod
    def _timed_out(group: PodGroup, record: _Record, now: float) -> bool:
        timeout = group.schedule_timeout_seconds
        return (
            timeout is not None
            and record.started is not None
            and not record.ever_placed
            and now - record.started >= timeout
        )

    def _first_in_line(self) -> str:
        """The group that may hold nodes while it waits: of those that have waited long enough for
        room, the one of the highest priority, then the oldest. One at a time, so that two groups
        never hold halves of the room each needs."""
        now = self._clock()
        best: tuple[int, float, str] | None = None
        for key, record in self._records.items():
            if not record.short or record.started is None or record.ever_placed:
                continue
            group = self._groups(key)
            if group is None or group.error:
                continue
            wait = group.schedule_timeout_seconds
            if now - record.started < (DEFAULT_RESERVE_AFTER if wait is None else wait):
                continue
            pending = [p for p in record.members.values() if _alive(p) and not p.node_name]
            if not pending:
                continue
            rank = (-max(p.priority for p in pending), group.created.timestamp(), key)
            if best is None or rank < best:
                best = rank
        return best[2] if best is not None else ""

    def _as_placed(self, pod: Pod) -> Pod:
        if pod.node_name or not _alive(pod):
            return pod
        node = self._assumed_on(pod.uid)
        return replace(pod, node_name=node) if node else pod

    def _latch(self, key: str, record: _Record) -> None:
        """Remember that minMember members were placed once: losing one later is a gap, not a wait."""
        group = self._groups(key)
        if record.ever_placed or group is None:
            return
        counts = count_members(record.members.values())
        record.ever_placed = counts.placed >= group.min_member

    def _member(self, uid: str) -> Pod | None:
        key = self._key_of.get(uid)
        record = self._records.get(key) if key is not None else None
        return record.members.get(uid) if record is not None else None

    def _remove(self, key: str, uid: str) -> None:
        self._key_of.pop(uid, None)
        record = self._records.get(key)
        if record is not None and record.members.pop(uid, None) is not None:
            self._dirty.add(key)


def _finished(pod: Pod) -> bool:
    return pod.phase in ("Succeeded", "Failed")


def _alive(pod: Pod) -> bool:
    return not _finished(pod) and not pod.deleting


def _gang_error(outcome: object) -> GangFitError | None:
    if isinstance(outcome, GangFitError):
        return outcome
    inner = getattr(outcome, "error", None)  # a PreemptionOutcome wrapping one
    return inner if isinstance(inner, GangFitError) else None


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GroupLookup:
    """A `groups` function for GangTracker over the cache's raw PodGroups, each parsed once per
    version; `forget` a deleted group (nothing would look it up again to find it gone)."""

    def __init__(self, objects: Callable[[str], Mapping[str, Any] | None]) -> None:
        self._objects = objects
        self._parsed: dict[str, tuple[Mapping[str, Any], PodGroup]] = {}

    def __call__(self, key: str) -> PodGroup | None:
        raw = self._objects(key)
        if raw is None:
            self._parsed.pop(key, None)
            return None
        hit = self._parsed.get(key)
        if hit is None or hit[0] is not raw:
            hit = (raw, pod_group_from_dict(raw))
            self._parsed[key] = hit
        return hit[1]

    def forget(self, key: str) -> None:
        self._parsed.pop(key, None)


__all__ = ["GangTracker", "GroupLookup"]
