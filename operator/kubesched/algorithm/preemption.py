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

Gangs (PodGroups, model/podgroup.py): evicting one member of a placed group breaks the whole
job, so a member of a gang (a valid PodGroup with minMember > 1) is evicted only with every
member of its group bound in the snapshot, on whatever node each runs. Its group may be evicted
only when all those members have a lower priority than the preemptor (and it is not the
preemptor's own group); otherwise its members stay, as higher-priority pods do. On a node, a
gang's members there are removed and reprieved together, as one victim; the candidate's victims,
its PDB violations and its rank count the whole group, off-node members included, and the
caller deletes them all. Extenders see each node's own victims, and the other members are added
to their answer. A gang preempting for its own members is algorithm/gang.py's.

ElasticQuotas (`snapshot.quotas`): with quotas in force the victims are capacity scheduling's
(algorithm/quota_reclaim.py): a pod within its quota's min reclaims from quotas over theirs, at
any priority; a node is a candidate only if the pod then also passes its quota checks. A gang is
reclaimed whole or not at all, as above. Without quotas nothing of it runs.

The `message` of a Preemption is what kube-scheduler 1.26+ appends to the FailedScheduling
message after "preemption: " (pkg/scheduler/framework/preemption/preemption.go); 1.20 appends
nothing. When no pod in the cluster has a lower priority than the preemptor, there is nothing
preemption could say, and the message stays 1.20's.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.algorithm.extender_wire import ExtenderError
from kubesched.algorithm.extenders import HTTPExtender, Victims, run_preemption
from kubesched.algorithm.generic import ExtenderFailure, FitError, node_failures, prefilter
from kubesched.algorithm.quota_reclaim import ERR_REASON_QUOTA, UPSTREAM, Reclaim, ReclaimSettings
from kubesched.model.disruption import DisruptionBudget
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podgroup import group_key, pod_group_from_dict
from kubesched.model.quota import QuotaState
from kubesched.plugins import registry
from kubesched.plugins.framework import SKIP, Predicate

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
    """A node and the pods to evict for it, most important first: pods on the node, and the
    members elsewhere of the gangs evicted there. `violators`: the uids of the victims counted
    in `num_pdb_violations`."""

    node_name: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int
    violators: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Gangs:
    """The gangs with members on the snapshot's nodes, as one preemptor sees them.

    A gang is a PodGroup that exists, is valid and has minMember > 1; its members are those
    `bound_members` counts (not deleting). Other pods naming a group are plain pods.
    """

    members: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict)  # group key -> members, all nodes
    group_of: Mapping[str, str] = field(default_factory=dict)  # member uid -> group key
    evictable: frozenset[str] = frozenset()  # the groups the preemptor may evict, whole

    @classmethod
    def of(cls, pod: Pod, snapshot: Snapshot, reclaim: Reclaim | None = None) -> Gangs:
        """The gangs of `snapshot`, and those `pod` may evict: every member of a lower priority
        (with quotas: every member a candidate of `reclaim`), and not `pod`'s own group (evicting
        it would break the group `pod` joins)."""
        raw = snapshot.objects.pod_groups
        if not raw:
            return NO_GANGS
        is_gang: dict[str, bool] = {}
        members: dict[str, list[Pod]] = {}
        for info in snapshot.nodes:
            for other in info.pods.values():
                # A member already terminating is leaving anyway: a plain pod, as bound_members has it.
                key = "" if other.deleting else group_key(other)
                if not key:
                    continue
                if key not in is_gang:
                    is_gang[key] = _is_gang(raw.get(key))
                if is_gang[key]:
                    members.setdefault(key, []).append(other)
        own = group_key(pod)
        may = reclaim.candidate if reclaim is not None else (lambda member: member.priority < pod.priority)
        return cls(
            {key: tuple(pods) for key, pods in members.items()},
            {member.uid: key for key, pods in members.items() for member in pods},
            frozenset(
                key for key, pods in members.items() if key != own and all(may(member) for member in pods)
            ),
        )


NO_GANGS = Gangs()


@dataclass(frozen=True, slots=True)
class Preemption:
    """The outcome: a node to nominate and its victims, or a `message` saying why not.

    The victims are every pod to delete, wherever it runs (a gang evicted for the node has
    members elsewhere). `clear_nomination` asks the caller to drop a nomination the pod holds
    (preemption cannot help).
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
    *,
    reclaim: ReclaimSettings = UPSTREAM,
    nominated: Collection[str] = (),
) -> FitError:
    """The PostFilter step after a failed cycle: `error` itself when preemption does not apply
    (an extender failed, the pod is malformed, there are no nodes), else a PreemptionOutcome."""
    if isinstance(error, ExtenderFailure) or error.pod_error is not None or not snapshot.nodes:
        return error
    found = preempt(
        error,
        snapshot,
        predicates,
        budgets,
        rng,
        nominated_node,
        extenders,
        reclaim=reclaim,
        nominated=nominated,
    )
    return PreemptionOutcome(error, found)


def preempt(
    error: FitError,
    snapshot: Snapshot,
    predicates: Sequence[Predicate],
    budgets: Sequence[DisruptionBudget] = (),
    rng: random.Random | None = None,
    nominated_node: str = "",
    extenders: Sequence[HTTPExtender] = (),
    *,
    reclaim: ReclaimSettings = UPSTREAM,
    nominated: Collection[str] = (),
) -> Preemption:
    """DefaultPreemption.preempt: choose a node and the victims to evict there for `error.pod`.

    `nominated_node` is the node the pod was nominated to by an earlier preemption, if any;
    `extenders` may narrow the candidates (their preemptVerb). With ElasticQuotas in force
    (`snapshot.quotas`), the victims follow capacity scheduling's rules (algorithm/quota_reclaim.py)
    and `reclaim`'s settings; `nominated`: the uids of the pods `snapshot` holds only as nominated.
    """
    pod = error.pod
    if pod.preemption_policy == PREEMPT_NEVER:
        return Preemption(message=MSG_PREEMPT_NEVER)
    quotas = Reclaim.of(pod, snapshot, reclaim, nominated)
    if nominated_node and _terminating_victims(pod, error, snapshot, nominated_node, quotas):
        return Preemption(message=MSG_TERMINATING)
    reclaims = quotas is not None and quotas.within_min  # victims of any priority
    if not reclaims and not any(p.priority < pod.priority for n in snapshot.nodes for p in n.pods.values()):
        # Nobody to evict anywhere (a cluster of one priority): the common case, made cheap.
        return Preemption(clear_nomination=True)
    prefiltered, reject = prefilter(pod, snapshot, predicates)
    if reject is not None:  # a PreFilter rejects the pod everywhere: no node could ever take it
        potential: list[NodeInfo] = []
    else:
        potential = nodes_where_preemption_might_help(snapshot.nodes, error.node_reasons)
    helpful = {n.name for n in potential}
    reasons: dict[str, tuple[str, ...]] = {
        n.name: (ERR_REASON_NOT_HELPFUL,) for n in snapshot.nodes if n.name not in helpful
    }
    if not potential or reject is not None:
        return Preemption(message=_no_room(pod, snapshot, reasons), clear_nomination=True)
    gangs = Gangs.of(pod, snapshot, quotas)
    states = [state for _, state in prefiltered]
    candidates, failed = dry_run(
        pod, snapshot, potential, predicates, states, budgets, rng or random.Random(), gangs, quotas
    )
    if not candidates:
        reasons.update(failed)
        return Preemption(message=_no_room(pod, snapshot, reasons), clear_nomination=True)
    if extenders:
        try:
            candidates = call_extenders(extenders, pod, snapshot, candidates, budgets, gangs)
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
    gangs: Gangs | None = None,
    reclaim: Reclaim | None = None,
) -> tuple[list[Candidate], dict[str, tuple[str, ...]]]:
    """dryRunPreemption: candidates not violating PDBs first; and why each other node failed.

    Nodes are tried from a random offset; the search stops once a non-violating candidate is
    among `num_candidates` found. `reclaim`: `Reclaim.of(pod, snapshot)`, and `gangs`:
    `Gangs.of(pod, snapshot, reclaim)`, computed when not given.
    """
    reclaim = reclaim or Reclaim.of(pod, snapshot)
    gangs = gangs if gangs is not None else Gangs.of(pod, snapshot, reclaim)
    wanted = num_candidates(len(potential))
    offset = rng.randrange(len(potential))
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    failed: dict[str, tuple[str, ...]] = {}
    for i in range(len(potential)):
        info = potential[(offset + i) % len(potential)]
        found = select_victims_on_node(pod, info, snapshot, predicates, states, budgets, gangs, reclaim)
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
    gangs: Gangs | None = None,
    reclaim: Reclaim | None = None,
) -> Candidate | tuple[str, ...]:
    """selectVictimsOnNode: the fewest lower-priority pods to evict from `info` so that `pod`
    fits, or why no eviction makes it fit.

    Removes every lower-priority pod; if the pod fits then, adds them back one by one (PDB
    violators first, each group from the most important pod down) while it still fits. A gang's
    members on the node are one victim: removed and added back together, and evicted with the
    group's members elsewhere (`gangs`: `Gangs.of(pod, snapshot, reclaim)`, computed when not
    given). With quotas (`reclaim`: `Reclaim.of(pod, snapshot)`, computed when not given) the
    candidates are capacity scheduling's, and the pod must also pass its quota checks: after
    every candidate is removed, and with each one added back.
    """
    reclaim = reclaim or Reclaim.of(pod, snapshot)
    gangs = gangs if gangs is not None else Gangs.of(pod, snapshot, reclaim)
    units = _victim_units(pod, info, gangs, reclaim)
    if not units:
        return (ERR_REASON_NO_VICTIMS,)
    node = _without(info, [p for here, _ in units for p in here])
    reasons = pod_fits(pod, node, snapshot, predicates, states)
    if reasons:
        return tuple(reasons)
    quotas = snapshot.quotas
    if reclaim is not None:
        quotas = _without_all(reclaim.quotas, [p for _, whole in units for p in whole])
        if not reclaim.admits(quotas, with_nominated=False):
            return (ERR_REASON_QUOTA,)
    # Budgets are charged for every pod a unit would evict, off-node members included.
    violating = {p.uid for p in split_by_budget([p for _, whole in units for p in whole], budgets)[0]}
    first = [unit for unit in units if any(p.uid in violating for p in unit[1])]
    rest = [unit for unit in units if not any(p.uid in violating for p in unit[1])]
    victims: list[Pod] = []
    for here, whole in (*first, *rest):
        reprieved = node
        for victim in here:
            reprieved = reprieved.with_pod(victim)
        if pod_fits(pod, reprieved, snapshot, predicates, states):
            victims.extend(whole)
            continue
        if reclaim is not None:
            back = quotas
            for p in whole:
                back = back.with_pod(p)
            if not reclaim.admits(back, with_nominated=True):  # upstream's reprievePod: a victim after all
                victims.extend(whole)
                continue
            quotas = back
        node = reprieved
    if not victims:  # it fits untouched: the failure came from elsewhere (1.22+ calls this an error)
        return (ERR_REASON_NO_VICTIMS,)
    counted = frozenset(v.uid for v in victims if v.uid in violating)
    return Candidate(info.name, tuple(sorted(victims, key=importance)), len(counted), counted)


def call_extenders(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    snapshot: Snapshot,
    candidates: Sequence[Candidate],
    budgets: Sequence[DisruptionBudget] = (),
    gangs: Gangs | None = None,
) -> list[Candidate]:
    """CallExtenders: the candidates the extenders accept, with the victims they name, in the
    candidates' order (the extenders' new nodes after them); raises ExtenderError.

    The extenders see each node's own victims only. A gang member among the victims they return
    brings its whole group back in; a candidate whose victims include a member of a gang `pod`
    may not evict is dropped.
    """
    gangs = gangs if gangs is not None else Gangs.of(pod, snapshot)
    offered = {c.node_name: _node_victims(c, snapshot) for c in candidates}
    accepted = run_preemption(extenders, pod, offered, snapshot)
    known = {c.node_name: c for c in candidates}
    order = {c.node_name: i for i, c in enumerate(candidates)}
    found: list[Candidate] = []
    for name, v in sorted(accepted.items(), key=lambda item: order.get(item[0], len(order))):
        whole = _with_gangs(name, v, known.get(name), gangs, budgets)
        if whole is not None:
            found.append(whole)
    return found


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
    states `prefilter` computed on the full snapshot."""
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


def _is_gang(raw: Mapping[str, Any] | None) -> bool:
    if raw is None:
        return False
    group = pod_group_from_dict(raw)
    return not group.error and group.min_member > 1


# A victim as selectVictimsOnNode removes and reprieves it: (its pods on the node, every pod it evicts).
_Unit = tuple[tuple[Pod, ...], tuple[Pod, ...]]


def _victim_units(pod: Pod, info: NodeInfo, gangs: Gangs, reclaim: Reclaim | None = None) -> list[_Unit]:
    """The pods `pod` may evict from `info` as units, most important first: a plain pod alone, a
    gang's members on the node together (ranked by its most important member, wherever it runs).

    With quotas (`reclaim`) the candidates are its own; as upstream, those of other quotas are
    taken least important first, each while its quota still gives pods (`Reclaim.reclaimable`).
    """
    units: list[_Unit] = []
    here: dict[str, list[Pod]] = {}
    for other in info.pods.values():
        if other.priority >= pod.priority if reclaim is None else not reclaim.candidate(other):
            continue
        key = gangs.group_of.get(other.uid)
        if key is None:
            units.append(((other,), (other,)))
        elif key in gangs.evictable:
            here.setdefault(key, []).append(other)
        # Else a member of a gang that may not go whole: it stays, as a higher-priority pod does.
    units.extend((tuple(pods), gangs.members[key]) for key, pods in here.items())
    units.sort(key=lambda unit: min(importance(p) for p in unit[1]))
    if reclaim is None or not reclaim.within_min:
        return units
    quotas = reclaim.quotas
    kept: list[_Unit] = []
    for unit in reversed(units):
        if reclaim.reclaimable(unit[1], quotas):
            kept.append(unit)
            quotas = _without_all(quotas, unit[1])
    return kept[::-1]


def _without_all(quotas: QuotaState, pods: Iterable[Pod]) -> QuotaState:
    for pod in pods:
        quotas = quotas.without_pod(pod)
    return quotas


def _node_victims(candidate: Candidate, snapshot: Snapshot) -> Victims:
    """The candidate's victims on its node, and the PDB violations among them."""
    info = snapshot.get(candidate.node_name)
    here = tuple(v for v in candidate.victims if info is not None and v.uid in info.pods)
    if len(here) == len(candidate.victims):
        return Victims(here, candidate.num_pdb_violations)
    return Victims(here, sum(v.uid in candidate.violators for v in here))


def _with_gangs(
    name: str,
    victims: Victims,
    candidate: Candidate | None,
    gangs: Gangs,
    budgets: Sequence[DisruptionBudget],
) -> Candidate | None:
    """An extender's answer for node `name` as a candidate: the victims it names and the rest of
    their gangs, or None when one of those gangs may not be evicted whole.

    The extender protocol names each node's victims among that node's pods (a reply naming a pod
    elsewhere is refused), and a 1.20 extender knows nothing of gangs: so the other members are
    added after its answer rather than offered to it. Those the dry run chose keep its PDB
    verdict; any other is charged to the budgets now.
    """
    seen = {p.uid for p in victims.pods}
    added: list[Pod] = []
    for key in dict.fromkeys(gangs.group_of[p.uid] for p in victims.pods if p.uid in gangs.group_of):
        if key not in gangs.evictable:
            return None
        for member in gangs.members[key]:
            if member.uid not in seen:
                seen.add(member.uid)
                added.append(member)
    chosen = {v.uid for v in candidate.victims} if candidate is not None else set()
    counted = candidate.violators if candidate is not None else frozenset()
    charged = {p.uid for p in split_by_budget([m for m in added if m.uid not in chosen], budgets)[0]}
    extra = {m.uid for m in added if m.uid in counted or m.uid in charged}
    return Candidate(
        name,
        tuple(sorted((*victims.pods, *added), key=importance)),
        victims.num_pdb_violations + len(extra),
        frozenset(extra | {p.uid for p in victims.pods if p.uid in counted}),
    )


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


def _terminating_victims(
    pod: Pod, error: FitError, snapshot: Snapshot, node_name: str, reclaim: Reclaim | None = None
) -> bool:
    """A pod `pod` could have evicted (lower-priority, or as quotas allow: `reclaim`, computed
    when not given) is still terminating on the nominated node, unless that node can no longer
    take the pod at all (then it may preempt elsewhere)."""
    if is_unresolvable(error.node_reasons.get(node_name, ())):
        return False
    info = snapshot.get(node_name)
    if info is None:
        return False
    reclaim = reclaim or Reclaim.of(pod, snapshot)
    if reclaim is not None:
        return reclaim.terminating(info.pods.values())
    return any(p.deleting and p.priority < pod.priority for p in info.pods.values())


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
