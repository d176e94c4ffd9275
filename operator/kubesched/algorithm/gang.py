"""Gangs: the members of a PodGroup placed all or nothing, on one snapshot, within one batch.

scheduler-plugins' coscheduling holds each member at a Permit barrier until minMember of them
have reached it (pkg/coscheduling/coscheduling.go); a race there can let a partial group
through. Here a batch holds every queued member of a group (the queue takes them together), and
`schedule_gang` places them one after another, each seeing the previous, on the batch's snapshot.
When the members that fit, with those already bound, reach `minMember`, every one that fits is
placed; otherwise the snapshot is left as it was and every member gets a GangFitError: nothing is
assumed, nothing bound.

Before any attempt, coscheduling's PreFilter checks: the group exists and is valid, its members
use one scheduler name, `minMember` of them exist, and the cluster's free resources can cover
`minResources` (CheckClusterResource); then the members still needed, up to `minMember`, are
admitted by their ElasticQuota together (algorithm/admission.py); a group its quota refuses goes
straight to preemption, where reclaim may free quota for it. Once `minMember` members are bound,
the others are ordinary pods.

Preemption: a group short of room (or of quota) evicts only when, on the snapshot after the
evictions, every member it still needs then passes its quota and fits; the members that fit
without it are nominated to their nodes meanwhile. A group may also be allowed to reserve
(`GangState.may_reserve`: the runtime grants it to the group that has waited longest at the head
of the line): its members that fit are nominated to their nodes, which pods of equal or lower
priority then see as taken, so that a stream of small pods cannot starve it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.algorithm import preemption
from kubesched.algorithm.admission import QuotaError, quota_error, refusal
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.algorithm.preemption import Preemption, PreemptionOutcome
from kubesched.algorithm.quota_reclaim import Reclaim
from kubesched.model.disruption import DisruptionBudget
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podgroup import PodGroup, bound_members, group_key, pod_group_from_dict
from kubesched.model.quota import in_one_unit
from kubesched.model.resources import ZERO, Resource

# One placement: the snapshot and the start index it leaves, or a FitError (or a bug) for the pod.
Place = Callable[[Pod, Snapshot, int], tuple[Any, Snapshot, int]]
# The snapshot a pod sees, with the pods nominated to nodes that it must leave room for, and their uids.
See = Callable[[Pod, Snapshot], tuple[Snapshot, frozenset[str]]]


@dataclass(frozen=True, slots=True)
class GangState:
    """What is known of a group beyond the snapshot (the runtime's count of its members)."""

    group: PodGroup | None  # None: no such PodGroup
    exist: int  # members not terminated, bound or pending, gated included
    scheduler_names: frozenset[str] = frozenset()
    may_reserve: bool = False  # its members that fit hold their nodes while it waits


class GangFitError(FitError):
    """A member not placed because of its group: `message` says why, after "pod group ns/name: ";
    `cause` is the member's own FitError when it was tried and did not fit."""

    def __init__(self, pod: Pod, num_all_nodes: int, key: str, message: str, cause: FitError | None = None):
        self.key = key
        self.message = message
        self.cause = cause
        super().__init__(pod, num_all_nodes, cause.node_reasons if cause is not None else {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.pod, self.num_all_nodes, self.key, self.message, self.cause))

    def summary(self) -> str:
        head = f"pod group {self.key}: {self.message}"
        return f"{head}: {self.cause.summary()}" if self.cause is not None else f"{head}."


def gang_states(pods: Iterable[Pod], snapshot: Snapshot) -> dict[str, GangState]:
    """The states of the groups of `pods` when nothing but the snapshot and the pods is known
    (simulate, shadows, tests): the members are those pods and the members on the nodes."""
    members: dict[str, dict[str, Pod]] = {}
    for pod in pods:
        key = group_key(pod)
        if key:
            members.setdefault(key, {})[pod.uid] = pod
    states: dict[str, GangState] = {}
    for key, pending in members.items():
        bound = {pod.uid: pod for pod in bound_members(snapshot, key)}
        raw = snapshot.objects.pod_groups.get(key)
        states[key] = GangState(
            pod_group_from_dict(raw) if raw is not None else None,
            len(pending.keys() | bound.keys()),
            frozenset(pod.scheduler_name for pod in pending.values()),
        )
    return states


def free_resources(snapshot: Snapshot) -> Resource:
    """What the schedulable nodes have left, summed (each node's shortfall counts as nothing); each
    pod a node runs takes one of its allowed pods (core.go getNodeResource)."""
    free = ZERO
    for info in snapshot.nodes:
        if info.node.unschedulable:
            continue
        # Clamped: a node still running pods of a device it no longer reports takes nothing from the others.
        free += (info.node.allocatable - info.requested - Resource(allowed_pods=len(info.pods))).max(ZERO)
    return free


def shortfall(needed: Resource, free: Resource) -> list[str]:
    """ "cpu 64 needed, 40 free" for each resource `free` cannot cover, both in one unit."""
    gaps: list[str] = []
    pairs: list[tuple[str, int, int]] = [
        ("cpu", needed.milli_cpu, free.milli_cpu),
        ("memory", needed.memory, free.memory),
        ("ephemeral-storage", needed.ephemeral_storage, free.ephemeral_storage),
        ("pods", needed.allowed_pods, free.allowed_pods),
        *((name, amount, free.scalar.get(name, 0)) for name, amount in sorted(needed.scalar.items())),
    ]
    for name, want, have in pairs:
        if want > have:
            written_want, written_have = in_one_unit(name, want, max(have, 0))
            gaps.append(f"{name} {written_want} needed, {written_have} free")
    return gaps


def precheck(
    pods: Sequence[Pod], state: GangState | None, key: str, bound: Sequence[Pod], snapshot: Snapshot
) -> str:
    """Why the group cannot be tried now (coscheduling's PreFilter), or "" when it can."""
    if state is None or state.group is None:
        return "the PodGroup does not exist; its members wait for it"
    group = state.group
    if group.error:
        return f"the PodGroup is invalid: {group.error}"
    names = state.scheduler_names | {pod.scheduler_name for pod in pods}
    if len(names) > 1:
        return f"its members use different scheduler names ({', '.join(sorted(names))}), so none is placed"
    exist = max(state.exist, len({p.uid for p in (*pods, *bound)}))
    if exist < group.min_member:
        return f"{exist} of {group.min_member} members exist"
    if group.min_resources != ZERO:
        # The members already placed hold part of minResources themselves (a pod slot each too).
        held = Resource(allowed_pods=len(bound))
        for pod in bound:
            held += pod.requests
        gaps = shortfall((group.min_resources - held).max(ZERO), free_resources(snapshot))
        if gaps:
            return f"the cluster's free resources cannot cover minResources ({'; '.join(gaps)})"
    return ""


def schedule_gang(
    pods: Sequence[Pod],
    state: GangState | None,
    profiles: Mapping[str, Algorithm],
    snapshot: Snapshot,
    rng: random.Random,
    start: int,
    place: Place,
    nominated: MutableMapping[str, tuple[Pod, str]],
    budgets: Sequence[DisruptionBudget] = (),
    see: See | None = None,
) -> tuple[list[Any], Snapshot, int]:
    """Decide the batch's members of one group (`pods`, all with the same group key) together.

    `place` places one pod as the batch does (quota, filters, scores, Reserve) without preempting;
    `see` gives the snapshot a member preempts on (the other pods' nominations in place).
    Returns an outcome per pod, in order, the snapshot after them and the next start index;
    `nominated` is updated as the batch's nominations are.
    """
    key = group_key(pods[0])
    bound = bound_members(snapshot, key)
    num_nodes = len(snapshot.nodes)
    why = precheck(pods, state, key, bound, snapshot)
    if why:
        return [_waiting(pod, num_nodes, key, why, nominated) for pod in pods], snapshot, start
    assert state is not None and state.group is not None
    need = state.group.min_member
    # The members still needed are admitted by their quota together: a group never gets half in.
    unit = pods[: max(need - len(bound), 0)]
    quota, refused = "", ""
    if unit and snapshot.quotas:
        borrowing = profiles[pods[0].scheduler_name].quota_borrowing
        quota, refused = refusal(snapshot.quotas, unit, (other for other, _ in nominated.values()), borrowing)
    look: See = see or (lambda _pod, view: (view, frozenset()))

    before, before_start, before_nominated = snapshot, start, dict(nominated)
    outcomes: list[Any] = []
    placed: list[tuple[Pod, str]] = []
    failures: list[tuple[int, FitError]] = []
    if quota:
        # Nothing is placed; only reclaim can let the group in (PostFilter after PreFilter's refusal).
        outcomes = [QuotaError(pod, num_nodes, quota, refused) for pod in pods]
        failures = list(enumerate(outcomes))
    else:
        for i, pod in enumerate(pods):
            outcome, snapshot, start = place(pod, snapshot, start)
            outcomes.append(outcome)
            if isinstance(outcome, ScheduleResult):
                placed.append((pod, outcome.node_name))
            elif isinstance(outcome, FitError):
                failures.append((i, outcome))
        if len(bound) + len(placed) >= need:
            # Placed: the members that did not fit are ordinary pods now, and may preempt as such.
            for i, error in failures:
                outcomes[i] = _preempt_alone(error, profiles, snapshot, look, rng, budgets, nominated)
            return outcomes, snapshot, start

    # Short: undo every placement, then see whether preemption would make the whole group fit.
    nominated.clear()
    nominated.update(before_nominated)
    have = len(bound) + len(placed)
    first = failures[0][1] if failures and not quota else None
    if quota:
        message = f"ElasticQuota {quota} refuses its {len(unit)} members still needed: {refused}"
    else:
        message = f"only {have} of {need} members can be placed"
    plan = _gang_preemption(
        pods=pods,
        outcomes=outcomes,
        failures=failures,
        profiles=profiles,
        snapshot=snapshot,
        rng=rng,
        budgets=budgets,
        missing=need - len(bound),
        look=look,
        nominated=nominated,
    )
    if plan is None and state.may_reserve:
        plan = {pod.uid: Preemption(node, (), "reserved for its pod group") for pod, node in placed}
    results: list[Any] = []
    for pod, outcome in zip(pods, outcomes, strict=True):
        # A quota's refusal is the message itself; a member's own node failures are its cause.
        cause = outcome if isinstance(outcome, FitError) and not quota else first
        error = GangFitError(pod, num_nodes, key, message, cause)
        step = plan.get(pod.uid) if plan is not None else None
        if step is not None:
            nominated[pod.uid] = (pod, step.node_name)
            results.append(PreemptionOutcome(error, step))
        elif isinstance(outcome, Exception) and not isinstance(outcome, FitError):
            results.append(outcome)  # a bug stays a bug
        else:
            results.append(_unnominated(error, nominated))
    return results, before, before_start


def _waiting(
    pod: Pod, num_nodes: int, key: str, why: str, nominated: MutableMapping[str, tuple[Pod, str]]
) -> FitError:
    return _unnominated(GangFitError(pod, num_nodes, key, why), nominated)


def _attempt(error: FitError, algorithm: Algorithm, look: See, snapshot: Snapshot, **kwargs: Any) -> FitError:
    """preemption.attempt for a member, on the snapshot `look` gives, with the policy's reclaim."""
    view, held = look(error.pod, snapshot)
    return preemption.attempt(
        error,
        view,
        algorithm.predicates,
        extenders=algorithm.extenders,
        reclaim=algorithm.quota_reclaim,
        nominated=held,
        **kwargs,
    )


def _unnominated(error: GangFitError, nominated: MutableMapping[str, tuple[Pod, str]]) -> FitError:
    """`error`, asking the caller to drop the member's nomination when it holds one (a node held
    for an earlier plan of its group that no longer stands)."""
    pod = error.pod
    if nominated.pop(pod.uid, None) is None and not pod.nominated_node_name:
        return error
    return PreemptionOutcome(error, Preemption(clear_nomination=True))


def _preempt_alone(
    error: FitError,
    profiles: Mapping[str, Algorithm],
    snapshot: Snapshot,
    look: See,
    rng: random.Random,
    budgets: Sequence[DisruptionBudget],
    nominated: MutableMapping[str, tuple[Pod, str]],
) -> Any:
    pod = error.pod
    algorithm = profiles[pod.scheduler_name]
    try:
        nominee = nominated.get(pod.uid, (pod, pod.nominated_node_name))[1]
        outcome = _attempt(error, algorithm, look, snapshot, budgets=budgets, rng=rng, nominated_node=nominee)
    except Exception as bug:
        return bug
    if isinstance(outcome, PreemptionOutcome) and outcome.preemption.node_name:
        nominated[pod.uid] = (pod, outcome.preemption.node_name)
    return outcome


def _gang_preemption(
    pods: Sequence[Pod],
    outcomes: Sequence[Any],
    failures: Sequence[tuple[int, FitError]],
    profiles: Mapping[str, Algorithm],
    snapshot: Snapshot,
    rng: random.Random,
    budgets: Sequence[DisruptionBudget],
    missing: int,
    look: See,
    nominated: Mapping[str, tuple[Pod, str]],
) -> dict[str, Preemption] | None:
    """Each member's node (and victims) when evicting lower-priority pods lets `missing` members fit
    at once, on `snapshot` (the members that fit already on it); None when it does not.
    `nominated`: the nominations standing before this attempt."""
    plan: dict[str, Preemption] = {}
    for pod, outcome in zip(pods, outcomes, strict=True):
        if isinstance(outcome, ScheduleResult):
            plan[pod.uid] = Preemption(outcome.node_name, (), "nominated while its pod group preempts")
    if not failures or len(plan) >= missing:
        return None
    # PodEligibleToPreemptOthers, for the group: while a lower-priority pod terminates on the node
    # a member short of room is nominated to, an earlier plan of the group is under way. The
    # members keep their nodes and nobody else is evicted: planning again around the victims
    # still there could pick others (ties are broken at random) and evict them as well.
    standing = {p.uid: node for p in pods if (node := nominated.get(p.uid, (p, p.nominated_node_name))[1])}
    if any(
        _terminating(error, profiles, look, snapshot, standing[error.pod.uid])
        for _, error in failures
        if error.pod.uid in standing
    ):
        return {uid: Preemption(node, (), preemption.MSG_TERMINATING) for uid, node in standing.items()}
    # The quota check each member passes, as place() makes it: the group's own nominations are on
    # `work` as placements already.
    key = group_key(pods[0])
    others = [other for other, _ in nominated.values() if group_key(other) != key]
    work = snapshot
    evicted = False
    for _, error in failures:
        if len(plan) >= missing:
            break
        pod = error.pod
        algorithm = profiles[pod.scheduler_name]
        try:
            failed: FitError | None = None
            if work.quotas:
                failed = quota_error(work.quotas, [pod], len(work.nodes), others, algorithm.quota_borrowing)
            if failed is None:
                view, _ = look(pod, work)
                node = algorithm.schedule(pod, view, rng, 0).node_name
                plan[pod.uid] = Preemption(node, (), "nominated while its pod group preempts")
        except FitError as again:
            failed = again.as_outcome()
        except Exception:
            return None
        if failed is not None:
            try:
                outcome = _attempt(failed, algorithm, look, work, budgets=budgets, rng=rng)
            except Exception:
                return None
            if not isinstance(outcome, PreemptionOutcome) or not outcome.preemption.node_name:
                continue
            found = outcome.preemption
            work = work.without_pods(found.victims)
            plan[pod.uid] = found
            evicted = True
            node = found.node_name
        work = work.with_pod_on(pod, node)
    if len(plan) < missing or not evicted:
        return None
    return plan


def _terminating(
    error: FitError, profiles: Mapping[str, Algorithm], look: See, snapshot: Snapshot, node_name: str
) -> bool:
    """PodEligibleToPreemptOthers' terminating-victim check for a member, with its quota's rules."""
    pod = error.pod
    view, held = look(pod, snapshot)
    reclaim = Reclaim.of(pod, view, profiles[pod.scheduler_name].quota_reclaim, held)
    return preemption._terminating_victims(pod, error, view, node_name, reclaim)


__all__ = [
    "GangFitError",
    "GangState",
    "bound_members",
    "free_resources",
    "gang_states",
    "schedule_gang",
    "shortfall",
]
