"""`kubesched explain`: why a pod goes (or would go) where it does, node by node.

The pure part, `explain(algorithm, pod, snapshot)`, runs a compiled policy against a snapshot
without binding anything and keeps what the scheduler throws away: every predicate is checked on
every node (as with alwaysCheckAllPredicates), each failure attributed to its predicate; the
extenders filter the nodes that pass; every feasible node is scored by every priority, with the
priority's weight and the weighted total. Two things differ from a scheduling cycle, on purpose:
all nodes are checked and scored (the scheduler stops at percentageOfNodesToScore of the nodes in
large clusters, and normalises scores over the nodes it found), and nothing is chosen at random
(ties are shown as ties).

The cluster state comes from the API server (snapshotfile.read_cluster, the scheduler's start-up
LISTs) or from a file `kubesched snapshot save` wrote; `algorithm_for` finds the policy the
scheduler would run for the pod: the active SchedulerPolicy for its scheduler name, else the
policy file given, else the built-in default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from kubesched.algorithm.extenders import ExtenderError, TransportFactory, run_filters
from kubesched.algorithm.generic import Algorithm, FitError, node_failures, priority_scores
from kubesched.kube.client import api_client, load_configuration, request
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.unsupported import NOT_IMPLEMENTED, refusal
from kubesched.plugins.node_validity import ValidNode
from kubesched.plugins.scheduling_gates import pre_enqueue
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.files import load_policy_file
from kubesched.tools.snapshot import ClusterState, read_cluster
from kubesched.tools.table import table

EXTENDERS = "extenders"


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
class Explanation:
    pod: str
    scheduler_name: str
    policy: str  # where the algorithm came from
    nodes: int
    message: str  # the FailedScheduling message, or where the pod would go
    rejected: tuple[Rejection, ...]
    feasible: tuple[NodeScore, ...]  # best first
    notes: tuple[str, ...] = field(default=())

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
        return out


def _filter_reasons(
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot
) -> tuple[list[NodeInfo], list[Rejection]]:
    states = [(p, p.prefilter(pod, snapshot)) for p in algorithm.predicates]
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
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot, *, scheduler_name: str = "", policy: str = ""
) -> Explanation:
    """Every node's verdict for `pod` under `algorithm`; calls the extenders, binds nothing.

    A gated pod is judged as it would be once its gates are gone; the message says it waits.
    """
    found = _explain(algorithm, pod, snapshot, scheduler_name=scheduler_name, policy=policy)
    gates = pre_enqueue(pod)
    if gates is None:
        return found
    message = f"not scheduled: {gates} (the scheduler does not try it until they are removed)"
    notes = (f"without the gates: {found.message}", *found.notes)
    return Explanation(
        found.pod, scheduler_name, policy, found.nodes, message, found.rejected, found.feasible, notes
    )


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
    if pod.node_name:
        notes.append(f"the pod is already bound to {pod.node_name}; it was left out of the cluster state")
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
    lines.extend(f"note: {note}" for note in e.notes)
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


# ------------------------------------------------------------------------------ cluster state


async def get_pod(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
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
) -> tuple[Algorithm, str]:
    """The policy the scheduler runs for `scheduler_name`, and where it comes from; its extenders
    are called through `transport` (by default over HTTP, as the scheduler calls them)."""
    if policies:
        from kubesched.policy.store import PolicyStore

        store = PolicyStore(scheduler_name, transport)
        for raw in policies:
            store.upsert(raw)
        active = store.active().get(scheduler_name)
        if active is not None:
            return active.algorithm, f"SchedulerPolicy {active.policy} (generation {active.generation})"
    if policy_file is not None:
        return compile_policy(load_policy_file(policy_file), transport=transport), str(policy_file)
    return default_algorithm(), "built-in default (kube-scheduler 1.20)"


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
    algorithm, source = algorithm_for(name_used, state.policies, policy_file)
    # A bound pod must not count against the nodes it is judged on.
    cache = state.cache(leave_out=frozenset({pod.uid}))
    try:
        return explain(algorithm, pod, cache.snapshot(), scheduler_name=name_used, policy=source)
    finally:
        for extender in algorithm.extenders:
            extender.close()
