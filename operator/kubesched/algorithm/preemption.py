"""Preemption: when no node fits a pod, find the node where evicting the fewest, least important
lower-priority pods makes room for it.

kube-scheduler 1.20's DefaultPreemption PostFilter plugin
(pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go), step by step:

1. `PodEligibleToPreemptOthers`: not with `preemptionPolicy: Never`, and not while a
   lower-priority pod on the pod's nominated node is still terminating (its last preemption is
   still under way).
2. `nodesWherePreemptionMightHelp`: nodes whose failure reasons are UnschedulableAndUnresolvable
   (node selector or affinity, taints, hostname, unschedulable node...: what the predicates declare
   in `unresolvable_reasons`) are left out.
3. `dryRunPreemption` from a random offset, until enough candidates are found
   (`calculateNumCandidates`: 10 % of the nodes, at least 100), each with `selectVictimsOnNode`:
   remove every lower-priority pod; if the pod then fits, reprieve as many as possible, PDB
   violators first, each group highest priority first.
4. `CallExtenders`: the extenders with a `preemptVerb` narrow the candidates (and their victims).
5. `pickOneNodeForPreemption`: fewest PDB violations, lowest highest-victim priority, smallest sum
   of priorities, fewest victims, latest start time of the highest-priority victims.

No I/O but the extenders' preempt calls. The caller deletes the victims and nominates the node.
The snapshot it passes already holds the pods nominated to nodes with a priority >= the
preemptor's (they count on their node, and being of equal or higher priority they are never
victims).

The `message` of a Preemption is what kube-scheduler 1.26+ appends to the FailedScheduling
message after "preemption: " (pkg/scheduler/framework/preemption/preemption.go); 1.20 appends
nothing. When no pod in the cluster has a lower priority than the preemptor, there is nothing
preemption could say, and the message stays 1.20's.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.algorithm.extenders import ExtenderError, HTTPExtender, Victims, run_preemption
from kubesched.algorithm.generic import ExtenderFailure, FitError, node_failures
from kubesched.model.disruption import DisruptionBudget
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins import registry
from kubesched.plugins.framework import SKIP, Predicate, Reject

PREEMPT_NEVER = "Never"
MIN_CANDIDATE_NODES_PERCENTAGE = 10  # DefaultPreemptionArgs defaults
MIN_CANDIDATE_NODES_ABSOLUTE = 100

MSG_PREEMPT_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
ERR_REASON_NOT_HELPFUL = "Preemption is not helpful for scheduling"
ERR_REASON_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NO_CANDIDATE = "no candidate node for preemption"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node and the pods to evict there, most important first."""

    node_name: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int


@dataclass(frozen=True, slots=True)
class Preemption:
    """The outcome: a node to nominate and its victims, or a `message` saying why not.

    `clear_nomination` asks the caller to drop a nomination the pod holds (preemption cannot help).
    """

    node_name: str = ""
    victims: tuple[Pod, ...] = ()
    message: str = ""
    clear_nomination: bool = False


class PreemptionOutcome(FitError):
    """No node fits, and what preemption did about it: its summary is the FailedScheduling
    message, with preemption's message after "preemption: " when it has one."""

    def __init__(self, error: FitError, preemption: Preemption) -> None:
        self.error = error
        self.preemption = preemption
        super().__init__(error.pod, error.num_all_nodes, error.node_reasons, error.pod_error)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.error, self.preemption))

    def summary(self) -> str:
        message = self.error.summary()
        extra = self.preemption.message
        return f"{message} preemption: {extra}" if extra else message


def attempt(
    error: FitError,
    snapshot: Snapshot,
    predicates: Sequence[Predicate],
    budgets: Sequence[DisruptionBudget] = (),
    rng: random.Random | None = None,
    nominated_node: str = "",
    extenders: Sequence[HTTPExtender] = (),
) -> FitError:
    """The PostFilter step after a failed cycle: `error` itself when preemption does not apply
    (an extender failed, the pod is malformed, there are no nodes), else a PreemptionOutcome."""
    if isinstance(error, ExtenderFailure) or error.pod_error is not None or not snapshot.nodes:
        return error
    found = preempt(error, snapshot, predicates, budgets, rng, nominated_node, extenders)
    return PreemptionOutcome(error, found)


def preempt(
    error: FitError,
    snapshot: Snapshot,
    predicates: Sequence[Predicate],
    budgets: Sequence[DisruptionBudget] = (),
    rng: random.Random | None = None,
    nominated_node: str = "",
    extenders: Sequence[HTTPExtender] = (),
) -> Preemption:
    """DefaultPreemption.preempt: choose a node and the victims to evict there for `error.pod`.

    `nominated_node` is the node the pod was nominated to by an earlier preemption, if any;
    `extenders` may narrow the candidates (their preemptVerb).
    """
    pod = error.pod
    if pod.preemption_policy == PREEMPT_NEVER:
        return Preemption(message=MSG_PREEMPT_NEVER)
    if nominated_node and _terminating_victims(pod, error, snapshot, nominated_node):
        return Preemption(message=MSG_TERMINATING)
    if not any(p.priority < pod.priority for n in snapshot.nodes for p in n.pods.values()):
        # Nobody to evict anywhere (a cluster of one priority): the common case, made cheap.
        return Preemption(clear_nomination=True)
    states = _prefilter(pod, snapshot, predicates)
    if states is None:  # a PreFilter rejects the pod everywhere: no node could ever take it
        potential: list[NodeInfo] = []
    else:
        potential = nodes_where_preemption_might_help(snapshot.nodes, error.node_reasons)
    helpful = {n.name for n in potential}
    reasons: dict[str, tuple[str, ...]] = {
        n.name: (ERR_REASON_NOT_HELPFUL,) for n in snapshot.nodes if n.name not in helpful
    }
    if not potential or states is None:
        return Preemption(message=_no_room(pod, snapshot, reasons), clear_nomination=True)
    candidates, failed = dry_run(
        pod, snapshot, potential, predicates, states, budgets, rng or random.Random()
    )
    if not candidates:
        reasons.update(failed)
        return Preemption(message=_no_room(pod, snapshot, reasons), clear_nomination=True)
    if extenders:
        try:
            candidates = call_extenders(extenders, pod, snapshot, candidates)
        except ExtenderError as exc:  # a transient failure: an earlier nomination stays
            return Preemption(message=str(exc))
        if not candidates:
            return Preemption(message=MSG_NO_CANDIDATE, clear_nomination=True)
        # pickOneNodeForPreemption: a node the extenders left with no victims needs no eviction.
        free = next((c for c in candidates if not c.victims), None)
        if free is not None:
            return Preemption(free.node_name)
    best = pick_one_node(candidates)
    return Preemption(best.node_name, best.victims)


def is_unresolvable(reasons: Iterable[str]) -> bool:
    """A failure no eviction can fix (UnschedulableAndUnresolvable), as the predicates declare it."""
    return any(registry.is_unresolvable(reason) for reason in reasons)


def nodes_where_preemption_might_help(
    nodes: Sequence[NodeInfo], node_reasons: Mapping[str, Sequence[str]]
) -> list[NodeInfo]:
    """nodesWherePreemptionMightHelp: the nodes whose failures are all resolvable."""
    return [n for n in nodes if not is_unresolvable(node_reasons.get(n.name, ()))]


def num_candidates(num_nodes: int) -> int:
    """calculateNumCandidates: 10 % of the nodes, at least 100, at most all."""
    n = num_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100
    return min(max(n, MIN_CANDIDATE_NODES_ABSOLUTE), num_nodes)


def dry_run(
    pod: Pod,
    snapshot: Snapshot,
    potential: Sequence[NodeInfo],
    predicates: Sequence[Predicate],
    states: Sequence[Any],
    budgets: Sequence[DisruptionBudget],
    rng: random.Random,
) -> tuple[list[Candidate], dict[str, tuple[str, ...]]]:
    """dryRunPreemption: candidates not violating PDBs first; and why each other node failed.

    Nodes are tried from a random offset; the search stops once a non-violating candidate is
    among `num_candidates` found.
    """
    wanted = num_candidates(len(potential))
    offset = rng.randrange(len(potential))
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    failed: dict[str, tuple[str, ...]] = {}
    for i in range(len(potential)):
        info = potential[(offset + i) % len(potential)]
        found = select_victims_on_node(pod, info, snapshot, predicates, states, budgets)
        if isinstance(found, Candidate):
            group = clean if found.num_pdb_violations == 0 else violating
            if len(group) < wanted:
                group.append(found)
            if clean and len(clean) + len(violating) >= wanted:
                break
        else:
            failed[info.name] = found
    return clean + violating, failed


def select_victims_on_node(
    pod: Pod,
    info: NodeInfo,
    snapshot: Snapshot,
    predicates: Sequence[Predicate],
    states: Sequence[Any],
    budgets: Sequence[DisruptionBudget] = (),
) -> Candidate | tuple[str, ...]:
    """selectVictimsOnNode: the fewest lower-priority pods to evict from `info` so that `pod`
    fits, or why no eviction makes it fit.

    Removes every lower-priority pod; if the pod fits then, adds them back one by one (PDB
    violators first, each group from the most important pod down) while it still fits.
    """
    potential = sorted((p for p in info.pods.values() if p.priority < pod.priority), key=importance)
    if not potential:
        return (ERR_REASON_NO_VICTIMS,)
    node = _without(info, potential)
    reasons = pod_fits(pod, node, snapshot, predicates, states)
    if reasons:
        return tuple(reasons)
    violators, others = split_by_budget(potential, budgets)
    victims: list[Pod] = []
    num_violations = 0
    for group, is_violating in ((violators, True), (others, False)):
        for victim in group:
            reprieved = node.with_pod(victim)
            if pod_fits(pod, reprieved, snapshot, predicates, states):
                victims.append(victim)
                num_violations += is_violating
            else:
                node = reprieved
    if not victims:  # it fits untouched: the failure came from elsewhere (1.22+ calls this an error)
        return (ERR_REASON_NO_VICTIMS,)
    return Candidate(info.name, tuple(sorted(victims, key=importance)), num_violations)


def call_extenders(
    extenders: Sequence[HTTPExtender], pod: Pod, snapshot: Snapshot, candidates: Sequence[Candidate]
) -> list[Candidate]:
    """CallExtenders: the candidates the extenders accept, with the victims they name, in the
    candidates' order (the extenders' new nodes after them); raises ExtenderError."""
    offered = {c.node_name: Victims(c.victims, c.num_pdb_violations) for c in candidates}
    accepted = run_preemption(extenders, pod, offered, snapshot)
    order = {c.node_name: i for i, c in enumerate(candidates)}
    return [
        Candidate(name, tuple(sorted(v.pods, key=importance)), v.num_pdb_violations)
        for name, v in sorted(accepted.items(), key=lambda item: order.get(item[0], len(order)))
    ]


def split_by_budget(pods: Sequence[Pod], budgets: Sequence[DisruptionBudget]) -> tuple[list[Pod], list[Pod]]:
    """filterPodsWithPDBViolation: (pods whose eviction would exceed a budget, the others), order kept.

    Each matching budget is charged once per pod not already in its disruptedPods.
    """
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[Pod] = []
    others: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if not budget.matches(pod) or pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else others).append(pod)
    return violating, others


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption: fewest PDB violations, then the lowest highest-victim priority,
    the smallest sum of priorities, the fewest victims, the latest start of the most important
    victims; the first of any remaining tie.

    1.20 takes the first victim as the highest-priority one, which it is not when a PDB violator
    of lower priority comes first; here it is the highest priority among the victims.
    """
    return min(candidates, key=_rank)


def importance(pod: Pod) -> tuple[int, float]:
    """MoreImportantPod as a sort key: higher priority first, then the pod that started earlier.

    The scheduler's view of a pod has no status.startTime; the creation time stands in for it.
    """
    return (-pod.priority, pod.created.timestamp())


def pod_fits(
    pod: Pod, node: NodeInfo, snapshot: Snapshot, predicates: Sequence[Predicate], states: Sequence[Any]
) -> list[str]:
    """PodPassesFiltersOnNode: why `pod` does not fit `node` (empty: it fits), given the per-pod
    states `_prefilter` computed on the full snapshot."""
    view: Snapshot | None = None

    def on_node() -> Iterator[tuple[Predicate, Any]]:
        nonlocal view
        for predicate, state in zip(predicates, states, strict=True):
            if state is not SKIP and predicate.pod_dependent:
                # Its state counted the pods `node` no longer (or again) holds: recount on this node.
                view = view or _with_node(snapshot, node)
                state = predicate.prefilter(pod, view)
            yield predicate, state

    for _, reasons in node_failures(pod, on_node(), node):
        return list(reasons)
    return []


# --- internals --------------------------------------------------------------------------------


def _without(info: NodeInfo, pods: Sequence[Pod]) -> NodeInfo:
    """`info` without `pods`: removed one by one, or the node rebuilt from the pods that stay,
    whichever touches fewer pods (each step copies the node's pods)."""
    if len(pods) * 2 <= len(info.pods):
        for pod in pods:
            info = info.without_pod(pod.uid)
        return info
    gone = {pod.uid for pod in pods}
    rebuilt = NodeInfo(info.node)
    for uid, pod in info.pods.items():
        if uid not in gone:
            rebuilt = rebuilt.with_pod(pod)
    return rebuilt


def _prefilter(pod: Pod, snapshot: Snapshot, predicates: Sequence[Predicate]) -> list[Any] | None:
    states = []
    for predicate in predicates:
        state = predicate.prefilter(pod, snapshot)
        if isinstance(state, Reject):
            return None
        states.append(state)
    return states


def _terminating_victims(pod: Pod, error: FitError, snapshot: Snapshot, node_name: str) -> bool:
    """A lower-priority pod is still terminating on the nominated node, unless that node can no
    longer take the pod at all (then it may preempt elsewhere)."""
    if is_unresolvable(error.node_reasons.get(node_name, ())):
        return False
    info = snapshot.get(node_name)
    return info is not None and any(p.deleting and p.priority < pod.priority for p in info.pods.values())


def _no_room(pod: Pod, snapshot: Snapshot, reasons: Mapping[str, tuple[str, ...]]) -> str:
    """The message when no candidate exists, in the shape of a FitError's."""
    return FitError(pod, len(snapshot.nodes), reasons).summary()


def _rank(candidate: Candidate) -> tuple[int, int, int, int, float]:
    victims = candidate.victims
    highest = max(v.priority for v in victims)
    # Each priority shifted by 2^31 as 1.20 does, so that negative priorities still add up.
    total = sum(v.priority + 2**31 for v in victims)
    earliest = min(v.created.timestamp() for v in victims if v.priority == highest)
    return (candidate.num_pdb_violations, highest, total, len(victims), -earliest)  # later start: better


def _with_node(snapshot: Snapshot, node: NodeInfo) -> Snapshot:
    nodes = list(snapshot.nodes)
    nodes[snapshot.index[node.name]] = node
    return Snapshot.of(nodes, snapshot.objects)
