"""A batch of pods decided one after another on one snapshot, each decision applied before the next.

The scheduling loop hands one batch at a time to its executor (kubesched.runtime.scheduler);
`simulate`, the shadow bench and the tests call `schedule_batch` directly. Pure: it changes
nothing it is given and returns every decision, for the caller to carry out.

ElasticQuotas (algorithm/admission.py) are checked before the filters, on the snapshot's QuotaState,
which each placement updates: a pod its quota refuses is not tried on any node, but goes to
preemption, as upstream runs PostFilter after a PreFilter rejection; whether evictions free quota
for it is reclaim's to decide (algorithm/quota_reclaim.py, with the policy's ReclaimSettings).

Nominated pods: kube-scheduler 1.20 keeps the pods nominated to a node by preemption in its
queue's PodNominator and adds those of equal or higher priority to a node before running the
filters on it (RunFilterPluginsWithNominatedPods, framework/runtime/framework.go). Here
`with_nominated` places them in the snapshot each pod sees instead: the filters stay unaware of
nominations. 1.20 also runs the filters a second time without the nominated pods (so that a pod
with affinity to a nominated pod does not count on it); that second pass is not done here.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence

from kubesched.algorithm import preemption
from kubesched.algorithm.admission import quota_error
from kubesched.algorithm.gang import GangState, gang_states, schedule_gang
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.algorithm.volume_reserve import assume_pod_volumes, binds_volumes, with_volumes
from kubesched.model.disruption import DisruptionBudget
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podgroup import group_key

# A decision: a node (perhaps with volumes to bind), no node (perhaps with a preemption), or a bug.
Outcome = ScheduleResult | FitError | Exception
# Called after each decision with the pod, its algorithm, the snapshot and start index it saw (shadows).
Observer = Callable[[Pod, Algorithm, Snapshot, int, Outcome], None]
# Called once for a PodGroup's members decided together: the members, the profiles, what was known of
# the group, the snapshot, start index and nominations they saw, and their outcomes (in order).
GangObserve = Callable[
    [
        Sequence[Pod],
        Mapping[str, Algorithm],
        GangState | None,
        Snapshot,
        int,
        Mapping[str, tuple[Pod, str]],
        Sequence[Outcome],
    ],
    None,
]


@dataclasses.dataclass(frozen=True, slots=True)
class GangAwareObserver:
    """An Observer that takes the members of a PodGroup at once (`gang`), as they were decided
    together, and every other pod one by one (`each`): a shadow decides a group as a group."""

    each: Observer
    gang: GangObserve

    def __call__(
        self, pod: Pod, algorithm: Algorithm, snapshot: Snapshot, start: int, outcome: Outcome
    ) -> None:
        self.each(pod, algorithm, snapshot, start, outcome)


def schedule_batch(
    profiles: Mapping[str, Algorithm],
    pods: Sequence[Pod],
    snapshot: Snapshot,
    rng: random.Random,
    start: int,
    observe: Observer | None = None,
    *,
    nominated: Mapping[str, tuple[Pod, str]] | None = None,
    budgets: Sequence[DisruptionBudget] = (),
    gangs: Mapping[str, GangState] | None = None,
) -> tuple[list[Outcome], int]:
    """Schedule pods one after another, each with its profile's algorithm and each decision applied
    to the snapshot the next one sees.

    A bug hit by one pod is returned as its outcome, not raised, so the other pods of the batch and
    the loop carry on. `observe` sees every decision with the very snapshot it was made on (shadow
    policies), a group's members with the snapshot the group was decided on, at once when it is a
    GangAwareObserver; it must not raise.

    Each pod sees the pods `nominated` to nodes with a priority >= its own in their place; a
    pod no node fits may preempt (`budgets`: the PodDisruptionBudgets), and is then nominated
    for the next pods of the batch too.

    The members of a PodGroup are decided together, all or nothing, where the first of them
    stands in `pods` (kubesched.algorithm.gang); `gangs` is what the caller knows of their groups,
    derived from the pods and the snapshot when not given.
    """
    outcomes: list[Outcome | None] = [None] * len(pods)
    nominated = dict(nominated or {})
    members: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        key = group_key(pod)
        if key:
            members.setdefault(key, []).append(i)
    if members and gangs is None:
        gangs = gang_states((pod for pod in pods if group_key(pod)), snapshot)

    def place(pod: Pod, view_of: Snapshot, at: int) -> tuple[Outcome, Snapshot, int]:
        # PreFilter's quota check, on the use before the nominations (it counts them itself). A pod
        # that cannot be parsed is refused for that instead, and preempts nobody.
        if view_of.quotas and pod.parse_error is None and not pod.unsupported:
            others = (other for other, _ in nominated.values())
            borrowing = profiles[pod.scheduler_name].quota_borrowing
            refused = quota_error(view_of.quotas, [pod], len(view_of.nodes), others, borrowing)
            if refused is not None:
                return refused, view_of, at
        view = with_nominated(view_of, pod, nominated) if nominated else view_of
        try:
            result = profiles[pod.scheduler_name].schedule(pod, view, rng, at)
        except FitError as exc:
            return exc.as_outcome(), view_of, at
        except Exception as exc:  # a bug
            return exc, view_of, at
        nominated.pop(pod.uid, None)
        reserved, after = _reserve(pod, profiles[pod.scheduler_name], result, view_of)
        return reserved, after, result.next_start_index

    for i, pod in enumerate(pods):
        if outcomes[i] is not None:
            continue
        key = group_key(pod)
        if key:
            unit = [pods[j] for j in members[key]]
            seen, began, held = snapshot, start, dict(nominated)

            def see(member: Pod, view_of: Snapshot, key: str = key) -> tuple[Snapshot, frozenset[str]]:
                # The group's own nominations are left out: its members are placed on the view already.
                others = {u: n for u, n in nominated.items() if group_key(n[0]) != key}
                return nominated_view(view_of, member, others)

            decided, snapshot, start = schedule_gang(
                pods=unit,
                state=(gangs or {}).get(key),
                profiles=profiles,
                snapshot=snapshot,
                rng=rng,
                start=start,
                place=place,
                nominated=nominated,
                budgets=budgets,
                see=see,
            )
            for j, outcome in zip(members[key], decided, strict=True):
                outcomes[j] = outcome
                if observe is not None and not isinstance(observe, GangAwareObserver):
                    observe(pods[j], profiles[pods[j].scheduler_name], seen, began, outcome)
            if isinstance(observe, GangAwareObserver):
                observe.gang(unit, profiles, (gangs or {}).get(key), seen, began, held, decided)
            continue
        view, placed = nominated_view(snapshot, pod, nominated)
        seen, began = view, start
        algorithm = profiles[pod.scheduler_name]
        outcome, snapshot, start = place(pod, snapshot, start)
        if isinstance(outcome, FitError):
            try:
                nominee = nominated.get(pod.uid, (pod, pod.nominated_node_name))[1]
                outcome = preemption.attempt(
                    outcome,
                    view,
                    algorithm.predicates,
                    budgets,
                    rng,
                    nominee,
                    algorithm.extenders,
                    reclaim=algorithm.quota_reclaim,
                    nominated=placed,
                )
            except Exception as bug:
                outcome = bug
            else:
                if isinstance(outcome, PreemptionOutcome) and outcome.preemption.node_name:
                    nominated[pod.uid] = (pod, outcome.preemption.node_name)
        outcomes[i] = outcome
        if observe is not None:
            observe(pod, algorithm, seen, began, outcome)
    return [outcome for outcome in outcomes if outcome is not None], start


def _reserve(
    pod: Pod, algorithm: Algorithm, result: ScheduleResult, snapshot: Snapshot
) -> tuple[Outcome, Snapshot]:
    """The snapshot with `pod` on its node and the PVs it binds there taken (VolumeBinding Reserve,
    which runs where CheckVolumeBinding does)."""
    info = snapshot.get(result.node_name) if pod.volumes and binds_volumes(algorithm) else None
    try:
        volumes = assume_pod_volumes(pod, snapshot.objects, info) if info else None
    except Exception as exc:  # VolumeBindingError, or a bug: the pod is not placed
        return exc, snapshot
    snapshot = snapshot.with_pod_on(pod, result.node_name)
    if volumes is None:
        return result, snapshot
    return with_volumes(result, volumes), dataclasses.replace(snapshot, objects=volumes.objects)


def with_nominated(snapshot: Snapshot, pod: Pod, nominated: Mapping[str, tuple[Pod, str]]) -> Snapshot:
    """`snapshot` with the pods nominated to its nodes that `pod` must leave room for: those of
    equal or higher priority, other than `pod` itself."""
    return nominated_view(snapshot, pod, nominated)[0]


def nominated_view(
    snapshot: Snapshot, pod: Pod, nominated: Mapping[str, tuple[Pod, str]]
) -> tuple[Snapshot, frozenset[str]]:
    """`with_nominated`, and the uids of the pods it placed: preemption must know them, as they
    take room but are neither victims nor quota use."""
    view = snapshot
    placed: list[str] = []
    for other, node_name in nominated.values():
        if other.uid == pod.uid or other.priority < pod.priority:
            continue
        info = view.get(node_name)
        if info is not None and other.uid not in info.pods:  # not already placed there
            view = view.with_pod_on(dataclasses.replace(other, node_name=node_name), node_name)
            placed.append(other.uid)
    return view, frozenset(placed)


__all__ = [
    "GangAwareObserver",
    "GangObserve",
    "Observer",
    "Outcome",
    "nominated_view",
    "schedule_batch",
    "with_nominated",
]
