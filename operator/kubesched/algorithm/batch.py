"""A batch of pods decided one after another on one snapshot, each decision applied before the next.

The scheduling loop hands one batch at a time to its executor (kubesched.runtime.scheduler);
`simulate`, the shadow bench and the tests call `schedule_batch` directly. Pure: it changes
nothing it is given and returns every decision, for the caller to carry out.

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
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.algorithm.volume_reserve import assume_pod_volumes, binds_volumes, with_volumes
from kubesched.model.disruption import DisruptionBudget
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod

# A decision: a node (perhaps with volumes to bind), no node (perhaps with a preemption), or a bug.
Outcome = ScheduleResult | FitError | Exception
# Called after each decision with the pod, its algorithm, the snapshot and start index it saw (shadows).
Observer = Callable[[Pod, Algorithm, Snapshot, int, Outcome], None]


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
) -> tuple[list[Outcome], int]:
    """Schedule pods one after another, each with its profile's algorithm and each decision applied
    to the snapshot the next one sees.

    A bug hit by one pod is returned as its outcome, not raised, so the other pods of the batch and
    the loop carry on. `observe` sees every decision with the very snapshot it was made on (shadow
    policies); it must not raise.

    Each pod sees the pods `nominated` to nodes with a priority >= its own in their place; a
    pod no node fits may preempt (`budgets`: the PodDisruptionBudgets), and is then nominated
    for the next pods of the batch too.
    """
    outcomes: list[Outcome] = []
    nominated = dict(nominated or {})
    for pod in pods:
        view = with_nominated(snapshot, pod, nominated) if nominated else snapshot
        seen, began = view, start
        algorithm = profiles[pod.scheduler_name]
        try:
            result = algorithm.schedule(pod, view, rng, start)
        except FitError as exc:
            try:
                nominee = nominated.get(pod.uid, (pod, pod.nominated_node_name))[1]
                outcome = preemption.attempt(
                    exc, view, algorithm.predicates, budgets, rng, nominee, algorithm.extenders
                )
            except Exception as bug:
                outcomes.append(bug)
            else:
                if isinstance(outcome, PreemptionOutcome) and outcome.preemption.node_name:
                    nominated[pod.uid] = (pod, outcome.preemption.node_name)
                outcomes.append(outcome)
        except Exception as exc:  # a bug
            outcomes.append(exc)
        else:
            nominated.pop(pod.uid, None)
            start = result.next_start_index
            reserved, snapshot = _reserve(pod, algorithm, result, snapshot)
            outcomes.append(reserved)
        if observe is not None:
            observe(pod, profiles[pod.scheduler_name], seen, began, outcomes[-1])
    return outcomes, start


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
    view = snapshot
    for other, node_name in nominated.values():
        if other.uid == pod.uid or other.priority < pod.priority:
            continue
        info = view.get(node_name)
        if info is not None and other.uid not in info.pods:  # not already placed there
            view = view.with_pod_on(dataclasses.replace(other, node_name=node_name), node_name)
    return view


__all__ = ["Observer", "Outcome", "schedule_batch", "with_nominated"]
