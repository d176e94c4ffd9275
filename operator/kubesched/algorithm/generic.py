"""Filter, score, select host: kube-scheduler 1.20's genericScheduler.Schedule.

Nodes are checked one after another from `start_index`, wrapping around, until enough feasible
nodes are found (numFeasibleNodesToFind; every node with percentageOfNodesToScore 100);
kube-scheduler checks them in parallel, which makes the set it finds in a large cluster vary
slightly, this search is deterministic. Extenders then filter the feasible nodes. The feasible
nodes are scored by the weighted priorities (plus the extenders' scores) and the best one wins,
ties broken uniformly at random.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.algorithm.extenders import ExtenderError, HTTPExtender, run_filters, run_prioritizers
from kubesched.algorithm.framework import SKIP, Predicate, Priority, Reject
from kubesched.algorithm.predicates.node_validity import ERR_REASON_INVALID_NODE
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


class FitError(Exception):
    """No node fits the pod; `node_reasons` maps each node that was checked to why it does not fit.

    `pod_error` is set instead when the pod itself could not be parsed (`Pod.parse_error`): no
    node was checked, and the message says what is wrong with the pod.
    """

    def __init__(
        self,
        pod: Pod,
        num_all_nodes: int,
        node_reasons: Mapping[str, Sequence[str]],
        pod_error: str | None = None,
    ) -> None:
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.node_reasons = node_reasons
        self.pod_error = pod_error
        super().__init__(self.summary())

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.pod, self.num_all_nodes, self.node_reasons, self.pod_error))

    def reason_counts(self) -> Counter[str]:
        """How many nodes gave each reason."""
        return Counter(reason for reasons in self.node_reasons.values() for reason in reasons)

    def summary(self) -> str:
        """FitError.Error(): "0/5 nodes are available: 2 node(s) ..., 3 Insufficient cpu."

        Entries are "<count> <reason>" strings sorted as strings, exactly as 1.20 sorts them.
        With no nodes at all it is 1.20's ErrNoNodesAvailable; for an unparsable pod,
        "0/N nodes are available: pod has <what is wrong>."
        """
        if self.pod_error is not None:
            return f"0/{self.num_all_nodes} nodes are available: pod has {self.pod_error}."
        if self.num_all_nodes == 0:
            return NO_NODES_AVAILABLE
        histogram = sorted(f"{count} {reason}" for reason, count in self.reason_counts().items())
        return f"0/{self.num_all_nodes} nodes are available: {', '.join(histogram)}."

    def __str__(self) -> str:
        return self.summary()


class ExtenderFailure(FitError):
    """A filter extender that is not ignorable failed: the pod is unschedulable this cycle."""

    def __init__(self, pod: Pod, num_all_nodes: int, message: str) -> None:
        self.message = message
        super().__init__(pod, num_all_nodes, {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.pod, self.num_all_nodes, self.message))

    def summary(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class WeightedPriority:
    """A priority with its weight; `name` is what the policy called it (the priority's own name
    when empty; names joined with "+" when several entries make one priority)."""

    priority: Priority
    weight: int
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or self.priority.name


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """The decision for one pod.

    `scores` holds the weighted total of each feasible node; it is empty when a single node was
    feasible, because then, as in 1.20, nothing is scored. `failed_nodes` holds the reasons of
    the checked nodes that did not fit.
    """

    node_name: str
    evaluated_nodes: int
    feasible_nodes: int
    next_start_index: int
    scores: Mapping[str, int] = field(default_factory=dict)
    failed_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Algorithm:
    """A compiled policy: filters in kube-scheduler's evaluation order and weighted priorities.

    `predicate_names` and `priority_names` are the legacy names the policy configured (aliases
    resolved, mandatory predicates included), for display.
    """

    predicates: tuple[Predicate, ...]
    priorities: tuple[WeightedPriority, ...]
    always_check_all_predicates: bool = False
    hard_pod_affinity_symmetric_weight: int = 1
    percentage_of_nodes_to_score: int = 0
    predicate_names: tuple[str, ...] = ()
    priority_names: tuple[str, ...] = ()
    extenders: tuple[HTTPExtender, ...] = ()
    ignored_priority_names: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        """The configuration in the legacy Policy's field names, for logs and status."""
        described: dict[str, Any] = {
            "predicates": list(self.predicate_names),
            "priorities": {w.label: w.weight for w in self.priorities},
            "ignoredPriorities": list(self.ignored_priority_names),
            "alwaysCheckAllPredicates": self.always_check_all_predicates,
            "hardPodAffinitySymmetricWeight": self.hard_pod_affinity_symmetric_weight,
            "percentageOfNodesToScore": self.percentage_of_nodes_to_score,
        }
        if self.extenders:
            described["extenders"] = [e.name for e in self.extenders]
        return described

    def binder_for(self, pod: Pod) -> HTTPExtender | None:
        """extendersBinding: the extender that binds `pod`, if one has a bindVerb and wants it."""
        return next((e for e in self.extenders if e.is_binder and e.is_interested(pod)), None)

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """numFeasibleNodesToFind: all nodes below 100, else a percentage (adaptive when 0), at least 100."""
        if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or self.percentage_of_nodes_to_score >= 100:
            return num_all_nodes
        percentage = self.percentage_of_nodes_to_score
        if percentage <= 0:
            percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
        return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)

    def schedule(
        self, pod: Pod, snapshot: Snapshot, rng: random.Random, start_index: int = 0
    ) -> ScheduleResult:
        """Choose a node for `pod`; raises FitError when none fits."""
        nodes = snapshot.nodes
        if not nodes:
            raise FitError(pod, 0, {})
        if pod.parse_error is not None:
            raise FitError(pod, len(nodes), {}, pod_error=pod.parse_error)

        start = start_index % len(nodes)
        feasible, failed, processed = self._find_feasible(pod, snapshot, start)
        next_start = (start + processed) % len(nodes)
        if feasible and self.extenders:
            try:
                outcome = run_filters(self.extenders, pod, feasible)
            except ExtenderError as exc:
                raise ExtenderFailure(pod, len(nodes), str(exc)) from exc
            feasible = outcome.feasible
            for name, reasons in outcome.failed.items():
                failed[name] = (*failed.get(name, ()), *reasons)
        if not feasible:
            raise FitError(pod, len(nodes), failed)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, processed, 1, next_start, {}, failed)

        totals = self.prioritize(pod, snapshot, feasible)
        chosen = select_host(feasible, totals, rng)
        scores = {node.name: total for node, total in zip(feasible, totals, strict=True)}
        return ScheduleResult(chosen, processed, len(feasible), next_start, scores, failed)

    def _find_feasible(
        self, pod: Pod, snapshot: Snapshot, start: int
    ) -> tuple[list[NodeInfo], dict[str, tuple[str, ...]], int]:
        filters = []
        nodes = snapshot.nodes
        for predicate in self.predicates:
            state = predicate.prefilter(pod, snapshot)
            if isinstance(state, Reject):
                # Every node gets the reasons, and the search does not move on (1.20).
                return [], dict.fromkeys((n.name for n in nodes), state.reasons), 0
            if state is not SKIP:
                filters.append((predicate.filter, state))
        check_all = self.always_check_all_predicates
        count = len(nodes)
        wanted = self.num_feasible_nodes_to_find(count)
        feasible: list[NodeInfo] = []
        failed: dict[str, tuple[str, ...]] = {}
        processed = 0
        for i in range(count):
            node = nodes[(start + i) % count]
            processed += 1
            if node.node.parse_error is not None:
                # Its allocatable and taints are unknown: no other reason would mean anything.
                failed[node.name] = (ERR_REASON_INVALID_NODE,)
                continue
            reasons: list[str] = []
            for run_filter, state in filters:
                found = run_filter(pod, state, node)
                if found:
                    reasons.extend(found)
                    if not check_all:
                        break
            if reasons:
                failed[node.name] = tuple(reasons)
                continue
            feasible.append(node)
            if len(feasible) >= wanted:
                break
        return feasible, failed, processed

    def prioritize(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> list[int]:
        """Weighted sum of every priority's normalised scores plus the extenders' scores; all 1
        with neither, as 1.20 does."""
        if not self.priorities and not self.extenders:
            return [1] * len(nodes)
        totals = [0] * len(nodes)
        for weighted in self.priorities:
            scores = priority_scores(weighted.priority, pod, snapshot, nodes)
            weight = weighted.weight
            for i, score in enumerate(scores):
                totals[i] += score * weight
        if self.extenders:
            extra = run_prioritizers(self.extenders, pod, nodes)
            for i, node in enumerate(nodes):
                totals[i] += extra.get(node.name, 0)
        return totals


def priority_scores(priority: Priority, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> list[int]:
    """One priority's normalised scores for `nodes` (prescore, score, normalize)."""
    state = priority.prescore(pod, snapshot, nodes)
    scores = [priority.score(pod, state, node) for node in nodes]
    priority.normalize(pod, state, nodes, scores)
    return scores


def select_host(nodes: Sequence[NodeInfo], totals: Sequence[int], rng: random.Random) -> str:
    """selectHost: the highest total; among equal ones each is picked with equal probability (reservoir)."""
    best = totals[0]
    selected = nodes[0].name
    tied = 1
    for node, total in zip(nodes[1:], totals[1:], strict=True):
        if total > best:
            best, selected, tied = total, node.name, 1
        elif total == best:
            tied += 1
            if rng.randrange(tied) == 0:
                selected = node.name
    return selected
