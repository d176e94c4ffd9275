"""`kubesched explain`: why a pod goes (or would go) where it does, node by node.

The pure part, `explain(algorithm, pod, snapshot)`, runs a compiled policy against a snapshot
without binding anything and keeps what the scheduler throws away: every predicate is checked on
every node (as with alwaysCheckAllPredicates), each failure attributed to its predicate; the
extenders filter the nodes that pass; every feasible node is scored by every priority, with the
priority's weight and the weighted total. Two things differ from a scheduling cycle, on purpose:
all nodes are checked and scored (the scheduler stops at percentageOfNodesToScore of the nodes in
large clusters, and normalises scores over the nodes it found), and nothing is chosen at random
(ties are shown as ties).

A member of a PodGroup is placed only with its group (kubesched.algorithm.gang): its explanation
gains the group's section (minMember, the members pending and bound, how many of the pending ones
fit now, and why each of the others does not), from a trial of the group's pending members on the
snapshot, as the scheduler's batch decides them. When the group would not be placed, the headline
is the members' FailedScheduling message ("pod group ns/name: only 5 of 8 members can be placed:
...").

The cluster state comes from the API server (tools/snapshot.read_cluster, the scheduler's start-up
LISTs) or from a file `kubesched snapshot save` wrote; `algorithm_for` finds the policy the
scheduler would run for the pod: the active SchedulerPolicy for its scheduler name, else the
policy file given, else the one the scheduler's leader publishes on its Lease (policy/published.py),
else the built-in default, with a warning that the scheduler's policy is unknown.

A pod of a namespace with an ElasticQuota gains the quota's section: per resource what the quota's
pods use, its min and max, and what the pod asks, and the verdict of the scheduler's own admission
(algorithm/admission.py) on the same snapshot, with the pods nominated by preemption counted as the
scheduler counts them. A pod its quota refuses is tried on no node by the scheduler: the headline is
then its FailedScheduling message, and the nodes' verdicts are what it would get without the quota.

A bound pod is judged as if it were pending now: the scheduler only ever judges pending pods, and
its spec.nodeName would have HostName reject every other node.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from kubesched.algorithm.admission import quota_error
from kubesched.algorithm.batch import Outcome, schedule_batch
from kubesched.algorithm.extender_wire import ExtenderError
from kubesched.algorithm.extenders import TransportFactory, run_filters
from kubesched.algorithm.gang import GangFitError, GangState
from kubesched.algorithm.generic import (
    Algorithm,
    FitError,
    ScheduleResult,
    node_failures,
    prefilter,
    priority_scores,
)
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.kube.client import Api, api_client, load_configuration, request
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.podgroup import (
    LEGACY_POD_GROUP_LABEL,
    POD_GROUP_LABEL,
    PodGroup,
    bound_members,
    group_key,
    group_name,
    pod_group_from_dict,
)
from kubesched.model.quota import QuotaState, in_one_unit
from kubesched.model.quota import request as quota_request
from kubesched.model.unsupported import NOT_IMPLEMENTED, refusal
from kubesched.plugins.node_validity import ValidNode
from kubesched.plugins.scheduling_gates import pre_enqueue
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.files import load_policy_file
from kubesched.policy.published import DEFAULT_SOURCE, published_policy
from kubesched.policy.store import PolicyStore
from kubesched.tools.simulate import queue_order
from kubesched.tools.snapshot import ClusterState, read_cluster
from kubesched.tools.table import table

EXTENDERS = "extenders"

# What a member of the explained pod's group gets now.
BOUND: Final = "bound"
PLACED: Final = "placed"  # tried now, placed with its group
FITS: Final = "fits"  # it fits, but its group is not placed
DOES_NOT_FIT: Final = "does not fit"
GATED: Final = "gated"  # never tried until its scheduling gates are removed


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one node does not fit: (what said so, its reason) pairs, in evaluation order."""

    node: str
    reasons: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class PriorityScore:
    priority: str
    score: int  # normalised, 0..100
    weight: int

    @property
    def weighted(self) -> int:
        return self.score * self.weight


@dataclass(frozen=True, slots=True)
class NodeScore:
    node: str
    total: int
    priorities: tuple[PriorityScore, ...]
    extenders: int = 0  # the extenders' points, already scaled and weighted


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member of the explained pod's PodGroup, and what it gets now."""

    pod: str
    status: str  # BOUND, PLACED, FITS, DOES_NOT_FIT or GATED
    node: str = ""  # where it is bound, would be placed, or would fit
    reason: str = ""  # why it cannot be placed: its own FitError summary, or its gates


@dataclass(frozen=True, slots=True)
class GroupExplanation:
    """The explained pod's PodGroup, and what trying its pending members now gives."""

    key: str  # namespace/name
    min_member: int | None  # None: the PodGroup does not exist or is invalid (`problem` says which)
    problem: str
    exist: int  # members pending or bound
    bound: int
    placeable: int  # pending members that fit now, placed one after another, all or nothing aside
    placed: bool  # tried now, the group's pending members would be placed
    message: str  # what trying them gives: the members' FailedScheduling message when not placed
    members: tuple[GroupMember, ...]  # bound first, then pending in queue order


@dataclass(frozen=True, slots=True)
class QuotaLine:
    """One resource of the pod's ElasticQuota, in one unit ("-": a max that does not name it)."""

    resource: str
    used: str
    min: str
    max: str
    request: str


@dataclass(frozen=True, slots=True)
class QuotaExplanation:
    """The pod's ElasticQuota and what admission says of the pod."""

    key: str  # namespace/name
    admitted: bool
    verdict: str  # "over max: nvidia.com/gpu 8 > 6", "within max; within min", "within max; borrowing: cpu"
    resources: tuple[QuotaLine, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    pod: str
    scheduler_name: str
    policy: str  # where the algorithm came from
    nodes: int
    message: str  # the FailedScheduling message, or where the pod would go
    rejected: tuple[Rejection, ...]
    feasible: tuple[NodeScore, ...]  # best first
    notes: tuple[str, ...] = field(default=())
    group: GroupExplanation | None = None  # the pod's PodGroup, when it belongs to one
    warnings: tuple[str, ...] = field(default=())  # e.g. the scheduler's policy is unknown
    quota: QuotaExplanation | None = None  # the pod's ElasticQuota, when its namespace has one

    @property
    def best(self) -> tuple[str, ...]:
        """The nodes with the highest total (the scheduler picks one of them at random)."""
        if not self.feasible:
            return ()
        top = self.feasible[0].total
        return tuple(s.node for s in self.feasible if s.total == top)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rejected"] = [
            {"node": r.node, "reasons": [{"by": by, "reason": reason} for by, reason in r.reasons]}
            for r in self.rejected
        ]
        for node in out["feasible"]:
            for entry in node["priorities"]:
                entry["weighted"] = entry["score"] * entry["weight"]
        out["best"] = list(self.best)
        if self.group is None:
            del out["group"]  # a pod of no group reads as before groups existed
        if self.quota is None:
            del out["quota"]  # nor does a pod of no quota read otherwise
        return out


def _filter_reasons(
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot
) -> tuple[list[NodeInfo], list[Rejection]]:
    states, _ = prefilter(pod, snapshot, algorithm.predicates, past_reject=True)
    feasible: list[NodeInfo] = []
    rejected: list[Rejection] = []
    for node in snapshot.nodes:
        reasons: list[tuple[str, str]] = []
        for predicate, found in node_failures(pod, states, node):
            if isinstance(predicate, ValidNode):  # say what exactly is wrong with the node
                reasons.extend(("node", f"{reason}: {node.node.parse_error}") for reason in found)
            else:
                reasons.extend((predicate.name, reason) for reason in found)
        if reasons:
            rejected.append(Rejection(node.name, tuple(reasons)))
        else:
            feasible.append(node)
    return feasible, rejected


def explain(
    algorithm: Algorithm,
    pod: Pod,
    snapshot: Snapshot,
    *,
    scheduler_name: str = "",
    policy: str = "",
    pending: Sequence[Pod] = (),
    nominated: Sequence[Pod] = (),
) -> Explanation:
    """Every node's verdict for `pod` under `algorithm`; calls the extenders, binds nothing.

    A bound pod is judged as if it were pending, its spec.nodeName ignored; the message says where
    it is bound. A gated pod is judged as it would be once its gates are gone; the message says it
    waits. For a member of a PodGroup, `pending` are the pending pods that may be its fellow members
    (others are ignored): the group's section says what trying them with it gives, and when the
    group would not be placed, the message is the members' FailedScheduling message. `nominated`:
    the pods nominated to nodes by preemption, which the quota admission counts.
    """
    bound = pod.node_name
    if bound:
        pod = dataclasses.replace(pod, node_name="")
    found = _explain(algorithm, pod, snapshot, scheduler_name=scheduler_name, policy=policy)
    if group_key(pod):
        group = explain_group(algorithm, pod, snapshot, pending)
        message = found.message if group.placed else group.message
        found = dataclasses.replace(found, message=message, group=group)
    if snapshot.quotas.of(pod.namespace) is not None:
        found = _with_quota(found, algorithm, pod, snapshot, nominated)
    gates = pre_enqueue(pod)
    if gates is not None:
        message = f"not scheduled: {gates} (the scheduler does not try it until they are removed)"
        notes = (f"without the gates: {found.message}", *found.notes)
        found = dataclasses.replace(found, message=message, notes=notes)
    if bound:
        message = f"bound to {bound}; judged as if it were pending now: {found.message}"
        note = f"spec.nodeName names {bound}; it is ignored here, or HostName would reject every other node"
        found = dataclasses.replace(found, message=message, notes=(note, *found.notes))
    return found


def _with_quota(
    found: Explanation, algorithm: Algorithm, pod: Pod, snapshot: Snapshot, nominated: Sequence[Pod]
) -> Explanation:
    """`found` with the quota's section; when the quota refuses the pod, its message is the headline."""
    quotas = snapshot.quotas
    refused = quota_error(quotas, [pod], len(snapshot.nodes), nominated, algorithm.quota_borrowing)
    section = quota_explanation(quotas, pod, refused.message if refused is not None else "")
    if refused is None:
        return dataclasses.replace(found, quota=section)
    notes = (f"without the quota: {found.message}", *found.notes)
    return dataclasses.replace(found, message=refused.summary(), notes=notes, quota=section)


def quota_explanation(quotas: QuotaState, pod: Pod, refused: str) -> QuotaExplanation:
    """The section of `pod`'s quota (there must be one); `refused`: why admission refuses it, or ""."""
    namespace = pod.namespace
    quota = quotas.of(namespace)
    assert quota is not None
    used, asked = quotas.used_by(namespace), quota_request(pod)
    if refused:
        verdict = refused
    else:
        borrowing = quotas.over_min(namespace, asked)
        verdict = "within max; " + (f"borrowing: {', '.join(borrowing)}" if borrowing else "within min")
    lines = []
    for name in sorted({*used, *quota.min, *quota.max, *asked}):
        bound = quota.max.get(name)
        figures = (used.get(name, 0), quota.min.get(name, 0), asked.get(name, 0))
        shown = in_one_unit(name, *figures, *(() if bound is None else (bound,)))
        lines.append(QuotaLine(name, shown[0], shown[1], "-" if bound is None else shown[3], shown[2]))
    return QuotaExplanation(quota.key, not refused, verdict, tuple(lines))


def explain_group(
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot, pending: Sequence[Pod]
) -> GroupExplanation:
    """The section of `pod`'s PodGroup: its members pending (`pod` and those of `pending` in its
    group) and bound (on the snapshot's nodes), and what trying the pending ones now gives.

    Two trials of the members that the queue would take (not gated), in queue order, on the
    snapshot: one as the scheduler decides them, all or nothing; one as if each were alone, for
    what each would get without its group (whether it fits, and if not, its own FitError).
    """
    key = group_key(pod)
    others = [p for p in pending if group_key(p) == key and p.uid != pod.uid and not p.node_name]
    waiting = queue_order([pod, *(p for p in others if not p.deleting)])
    trial = [p for p in waiting if p.uid == pod.uid or pre_enqueue(p) is None]
    bound = bound_members(snapshot, key)
    raw = snapshot.objects.pod_groups.get(key)
    group = pod_group_from_dict(raw) if raw is not None else None
    exist = len({p.uid for p in (*waiting, *bound)})
    names = frozenset(p.scheduler_name for p in waiting)
    profiles = dict.fromkeys(names, algorithm)
    state = GangState(group, exist, names)
    now, _ = schedule_batch(profiles, trial, snapshot, random.Random(0), 0, gangs={key: state})
    # minMember 1 with no minResources: the members placed one after another, nothing held back.
    alone_group = PodGroup(pod.namespace, group_name(pod), min_member=1)
    alone, _ = schedule_batch(
        profiles, trial, snapshot, random.Random(0), 0, gangs={key: GangState(alone_group, exist, names)}
    )
    placed = not any(_gang_error(o) is not None for o in now)
    members = [GroupMember(p.key, BOUND, p.node_name) for p in sorted(bound, key=lambda p: p.key)]
    tried = {
        p.uid: (outcome, alone_outcome) for p, outcome, alone_outcome in zip(trial, now, alone, strict=True)
    }
    for member in waiting:
        if member.uid not in tried:
            members.append(GroupMember(member.key, GATED, reason=pre_enqueue(member) or ""))
            continue
        outcome, alone_outcome = tried[member.uid]
        if isinstance(outcome, ScheduleResult):
            members.append(GroupMember(member.key, PLACED, outcome.node_name))
        elif isinstance(alone_outcome, ScheduleResult):
            members.append(GroupMember(member.key, FITS, alone_outcome.node_name))
        else:
            members.append(GroupMember(member.key, DOES_NOT_FIT, reason=_own_reason(alone_outcome)))
    if group is None:
        problem = "the PodGroup does not exist"
    elif group.error:
        problem = f"the PodGroup is invalid: {group.error}"
    else:
        problem = ""
    if placed:
        placing = sum(isinstance(o, ScheduleResult) for o in now)
        message = f"would be placed: {placing} pending member(s) now, with {len(bound)} bound"
    else:
        message = _message(now[next(i for i, p in enumerate(trial) if p.uid == pod.uid)])
    return GroupExplanation(
        key,
        group.min_member if group is not None and not problem else None,
        problem,
        exist,
        len(bound),
        sum(isinstance(o, ScheduleResult) for o in alone),
        placed,
        message,
        tuple(members),
    )


def _gang_error(outcome: Outcome) -> GangFitError | None:
    """The GangFitError behind `outcome`: its member was held back by its group."""
    if isinstance(outcome, PreemptionOutcome):
        outcome = outcome.error
    return outcome if isinstance(outcome, GangFitError) else None


def _own_reason(outcome: Outcome) -> str:
    """Why the member does not fit by itself: its own FitError, without what preemption said."""
    if isinstance(outcome, PreemptionOutcome):
        outcome = outcome.error
    if (
        isinstance(outcome, GangFitError)
        and outcome.cause is not None
        and outcome.cause.pod.uid == outcome.pod.uid
    ):
        outcome = outcome.cause
    return _message(outcome)


def _message(outcome: Outcome) -> str:
    if isinstance(outcome, FitError):
        return outcome.summary()
    if isinstance(outcome, ScheduleResult):
        return f"would be scheduled on {outcome.node_name}"
    return f"internal error while scheduling: {outcome!r}"


def _explain(
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot, *, scheduler_name: str, policy: str
) -> Explanation:
    key = f"{pod.namespace}/{pod.name}"
    notes: list[str] = []
    if pod.parse_error is not None or pod.unsupported:
        error = pod.parse_error if pod.parse_error is not None else refusal(pod.unsupported)
        message = FitError(pod, len(snapshot.nodes), {}, pod_error=error).summary()
        refused = tuple(f"refused: the pod uses {label}, {NOT_IMPLEMENTED}" for label in pod.unsupported)
        return Explanation(key, scheduler_name, policy, len(snapshot.nodes), message, (), (), refused)
    feasible, rejected = _filter_reasons(algorithm, pod, snapshot)
    failure: str | None = None  # a failing extender that is not ignorable
    if feasible and algorithm.extenders:
        try:
            outcome = run_filters(algorithm.extenders, pod, feasible)
        except ExtenderError as exc:
            failure = str(exc)
            feasible = []
        else:
            notes.extend(f"ignorable extender {n} skipped: {error}" for n, error in outcome.skipped.items())
            kept = {n.name for n in outcome.feasible}
            for node in feasible:
                if node.name not in kept:
                    reasons = outcome.failed.get(node.name) or ["node(s) filtered out by an extender"]
                    rejected.append(Rejection(node.name, tuple((EXTENDERS, r) for r in reasons)))
            feasible = outcome.feasible
    rejected.sort(key=lambda r: r.node)

    scores = _scores(algorithm, pod, snapshot, feasible)
    if failure is not None:
        message = failure
    elif not feasible:
        message = FitError(pod, len(snapshot.nodes), _summary_reasons(algorithm, rejected)).summary()
    else:
        best = [s.node for s in scores if s.total == scores[0].total]
        message = f"would be scheduled on {best[0]}"
        if len(best) > 1:
            message = f"would be scheduled on one of {', '.join(best)} (tied, picked at random)"
        if len(feasible) == 1:
            notes.append("only one node fits: the scheduler takes it without scoring")
    return Explanation(
        key,
        scheduler_name,
        policy,
        len(snapshot.nodes),
        message,
        tuple(rejected),
        tuple(scores),
        tuple(notes),
    )


def _summary_reasons(algorithm: Algorithm, rejected: Sequence[Rejection]) -> dict[str, tuple[str, ...]]:
    """The reasons the scheduler's own message counts: unless the policy checks all predicates,
    only those of the first predicate that failed on each node."""
    found = {}
    for rejection in rejected:
        first = rejection.reasons[0][0]
        keep = algorithm.always_check_all_predicates
        found[rejection.node] = tuple(
            reason for by, reason in rejection.reasons if keep or by in (first, EXTENDERS)
        )
    return found


def _scores(algorithm: Algorithm, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> list[NodeScore]:
    if not nodes:
        return []
    per_priority = [
        (w.label, w.weight, priority_scores(w.priority, pod, snapshot, nodes)) for w in algorithm.priorities
    ]
    extender_points = dict.fromkeys((n.name for n in nodes), 0)
    for extender in algorithm.extenders:
        if not extender.config.prioritize_verb or not extender.is_interested(pod):
            continue
        try:
            for host, points in extender.prioritize(pod, nodes).items():
                if host in extender_points:
                    extender_points[host] += points * 10  # MaxNodeScore / MaxExtenderPriority
        except ExtenderError:
            continue  # prioritize failures are ignored, as in scheduling
    result = []
    for i, node in enumerate(nodes):
        entries = tuple(PriorityScore(label, scores[i], weight) for label, weight, scores in per_priority)
        extra = extender_points[node.name]
        total = sum(e.weighted for e in entries) + extra
        if not algorithm.priorities and not algorithm.extenders:
            total = 1  # 1.20 gives every node 1 when nothing scores
        result.append(NodeScore(node.name, total, entries, extra))
    result.sort(key=lambda s: (-s.total, s.node))
    return result


# ----------------------------------------------------------------------------------- rendering


def render_json(explanation: Explanation) -> str:
    return json.dumps(explanation.as_dict(), indent=2)


def render_table(explanation: Explanation) -> str:
    e = explanation
    lines = [
        f"Pod {e.pod}   scheduler {e.scheduler_name or '-'}   policy {e.policy or '-'}   {e.nodes} node(s)",
        e.message,
    ]
    lines.extend(f"WARNING: {warning}" for warning in e.warnings)
    lines.extend(f"note: {note}" for note in e.notes)
    if e.quota is not None:
        quota = [["RESOURCE", "USED", "MIN", "MAX", "REQUEST"]]
        quota += [[q.resource, q.used, q.min, q.max, q.request] for q in e.quota.resources]
        lines += ["", f"ELASTIC QUOTA {e.quota.key}   {e.quota.verdict}", *table(quota)]
    if e.group is not None:
        lines += ["", *_group_lines(e.group, e.message)]
    if e.rejected:
        lines += ["", f"REJECTED ({len(e.rejected)})"]
        rows: list[list[str]] = [["NODE", "BY", "REASON"]]
        for rejection in e.rejected:
            for i, (by, reason) in enumerate(rejection.reasons):
                rows.append([rejection.node if i == 0 else "", by, reason])
        lines += table(rows)
    if e.feasible:
        lines += ["", f"FEASIBLE ({len(e.feasible)}), best first"]
        rows = [["RANK", "NODE", "TOTAL", "PRIORITY", "SCORE", "WEIGHT", "WEIGHTED"]]
        for rank, node in enumerate(e.feasible, 1):
            entries = [(p.priority, str(p.score), str(p.weight), str(p.weighted)) for p in node.priorities]
            if node.extenders:
                entries.append((EXTENDERS, "", "", str(node.extenders)))
            if not entries:
                entries = [("(none)", "", "", "")]
            for i, (name, score, weight, weighted) in enumerate(entries):
                head = [str(rank), node.node, str(node.total)] if i == 0 else ["", "", ""]
                rows.append([*head, name, score, weight, weighted])
        lines += table(rows)
    return "\n".join(lines)


def _group_lines(group: GroupExplanation, headline: str) -> list[str]:
    spec = group.problem or f"minMember {group.min_member}"
    lines = [
        f"POD GROUP {group.key}   {spec}   {group.exist} member(s), {group.bound} bound"
        f"   {group.placeable} pending member(s) fit now"
    ]
    if group.message != headline:  # the headline says it already when the group is not placed
        lines.append(group.message)
    rows = [["MEMBER", "STATUS", "NODE", "REASON"]]
    rows += [[m.pod, m.status, m.node, m.reason] for m in group.members]
    return lines + table(rows)


# ------------------------------------------------------------------------------ cluster state


async def get_pod(api: Api, namespace: str, name: str) -> dict[str, Any] | None:
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}", timeout=30)
    if status == 404:
        return None
    if status >= 300:
        raise RuntimeError(f"reading pod {namespace}/{name} failed: {status} {body}")
    return dict(body)


def algorithm_for(
    scheduler_name: str,
    policies: Sequence[Mapping[str, Any]] | None,
    policy_file: Path | None,
    transport: TransportFactory | None = HTTPTransport,
    leases: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[Algorithm, str, str]:
    """The policy the scheduler runs for `scheduler_name`, where it comes from, and a warning when
    that is unknown ("" otherwise): the built-in default is then a guess. `leases` are those of
    ClusterState.leases; the extenders are called through `transport` (by default over HTTP, as
    the scheduler calls them)."""
    if policies:
        store = PolicyStore(scheduler_name, transport)
        for raw in policies:
            store.upsert(raw)
        active = store.active().get(scheduler_name)
        if active is not None:
            return active.algorithm, f"SchedulerPolicy {active.policy} (generation {active.generation})", ""
    if policy_file is not None:
        return compile_policy(load_policy_file(policy_file), transport=transport), str(policy_file), ""
    published = None if leases is None else published_policy(leases, scheduler_name)
    if published is not None and published.known:
        where = f"published on Lease {published.lease}" + ("" if published.holder else ", released")
        source = f"{published.source}, {where}"
        if published.policy is None:
            return default_algorithm(), source, ""
        return compile_policy(published.policy, transport=transport), source, ""
    if leases is None:
        why = "Leases are not readable with these credentials"
    elif published is None:
        why = (
            f"no Lease publishes the policy of scheduler {scheduler_name} (it is not running, runs "
            "without leader election, or is older than this explain)"
        )
    else:
        why = f"its Lease {published.lease} says {published.source}"
    warning = f"the scheduler's policy is unknown: {why}; judged with the {DEFAULT_SOURCE} instead"
    return default_algorithm(), DEFAULT_SOURCE, warning


class PodNotFound(LookupError):
    pass


async def read_live_state(
    kubeconfig: str | None, context: str | None = None, pod: tuple[str, str] | None = None
) -> tuple[ClusterState, dict[str, Any] | None]:
    """The cluster state from the API server and, when `pod` (namespace, name) names one, that pod;
    raises PodNotFound when it does not exist. `context` picks a kubeconfig context."""
    conf = await load_configuration(kubeconfig, context)
    async with api_client(conf) as api:
        raw = None
        if pod is not None:
            raw = await get_pod(api, *pod)
            if raw is None:
                raise PodNotFound(f"pod {pod[0]}/{pod[1]} not found")
        return await read_cluster(api), raw


async def explain_live(
    kubeconfig: str | None, namespace: str, name: str, scheduler_name: str | None, policy_file: Path | None
) -> Explanation:
    """Read the cluster, pick the policy, explain the pod (nothing is written)."""
    state, raw = await read_live_state(kubeconfig, pod=(namespace, name))
    assert raw is not None  # read_live_state raises PodNotFound otherwise
    return explain_in_state(state, raw, scheduler_name, policy_file)


def explain_snapshot(
    state: ClusterState, namespace: str, name: str, scheduler_name: str | None, policy_file: Path | None
) -> Explanation:
    """Explain a pod of a saved snapshot, against the cluster state and policies it holds."""
    raw = state.pod(namespace, name)
    if raw is None:
        raise PodNotFound(f"pod {namespace}/{name} is not in the snapshot")
    return explain_in_state(state, raw, scheduler_name, policy_file)


def explain_in_state(
    state: ClusterState, raw: Mapping[str, Any], scheduler_name: str | None, policy_file: Path | None
) -> Explanation:
    pod = pod_from_dict(raw)
    name_used = scheduler_name or pod.scheduler_name
    algorithm, source, warning = algorithm_for(name_used, state.policies, policy_file, leases=state.leases)
    # A bound pod must not count against the nodes it is judged on.
    cache = state.cache(leave_out=frozenset({pod.uid}))
    pending = _pending_members(state, pod)
    try:
        found = explain(
            algorithm,
            pod,
            cache.snapshot(),
            scheduler_name=name_used,
            policy=source,
            pending=pending,
            nominated=_nominated(state, pod),
        )
        return dataclasses.replace(found, warnings=(warning,)) if warning else found
    finally:
        for extender in algorithm.extenders:
            extender.close()


def _nominated(state: ClusterState, pod: Pod) -> list[Pod]:
    """The other pending pods of `state` nominated to a node by preemption (only those are parsed)."""
    found = []
    for raw in state.pods:
        if (raw.get("spec") or {}).get("nodeName") or not (raw.get("status") or {}).get("nominatedNodeName"):
            continue
        other = pod_from_dict(raw)
        if other.uid != pod.uid:
            found.append(other)
    return found


def _pending_members(state: ClusterState, pod: Pod) -> list[Pod]:
    """The pending pods of `pod`'s PodGroup in `state` (only those are parsed)."""
    name = group_name(pod)
    if not name:
        return []
    found = []
    for raw in state.pods:
        meta = raw.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("namespace") != pod.namespace or (raw.get("spec") or {}).get("nodeName"):
            continue
        if (labels.get(POD_GROUP_LABEL) or labels.get(LEGACY_POD_GROUP_LABEL)) == name:
            found.append(pod_from_dict(raw))
    return found
