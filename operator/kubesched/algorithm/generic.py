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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from kubesched.algorithm.extender_wire import ExtenderError
from kubesched.algorithm.extenders import HTTPExtender, run_filters, run_prioritizers
from kubesched.algorithm.quota_reclaim import UPSTREAM, ReclaimSettings
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quota import GUARANTEES
from kubesched.model.table import NodeTable
from kubesched.model.unsupported import refusal
from kubesched.plugins.framework import SKIP, Predicate, Priority, Reject
from kubesched.plugins.node_validity import ValidNode

K = TypeVar("K")
V = TypeVar("V")

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
_VALID_NODE = ValidNode()


class FitError(Exception):
    """No node fits the pod; `node_reasons` maps each node that was checked to why it does not fit.

    `pod_error` is set instead when the pod itself could not be parsed (`Pod.parse_error`) or uses a
    field kubesched refuses (`Pod.unsupported`): no node was checked, no preemption can help, and
    the message says what is wrong with the pod.
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

    def as_outcome(self) -> FitError:
        """This error, caught, as a pod's outcome: without its traceback. Its frames hold the snapshots
        and, through the frame that keeps the outcome, this error again: a cycle that only the
        collector's rare full collections free, so each unschedulable pod held a few snapshots' worth
        of NodeInfos for hours (bench/soak.py)."""
        return self.with_traceback(None)

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
    # False: every filter and score per node (the reference the vectorised forms are tested against).
    vectorised: bool = True
    # ElasticQuota borrowing (algorithm/admission.py): GUARANTEES (upstream's rule) or CLUSTER.
    quota_borrowing: str = GUARANTEES
    # What quota preemption does beyond upstream (algorithm/quota_reclaim.py).
    quota_reclaim: ReclaimSettings = UPSTREAM
    # Quotas borrowing wait in order of their dominant share, not first come (runtime/queue.py).
    quota_fair_share: bool = False

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
        quotas: dict[str, Any] = {}
        if self.quota_borrowing != GUARANTEES:
            quotas["borrowing"] = self.quota_borrowing
        if self.quota_reclaim.protect_min:
            quotas["protectMin"] = True
        if self.quota_fair_share:
            quotas["fairShare"] = True
        if quotas:
            described["quotas"] = quotas
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
        if pod.unsupported:
            raise FitError(pod, len(nodes), {}, pod_error=refusal(pod.unsupported))

        start = start_index % len(nodes)
        table = snapshot.table() if self.vectorised else None
        rows: npt.NDArray[np.int64] | None = None
        feasible: Sequence[NodeInfo]
        if table is not None:
            rows, failed, processed = self._find_feasible_vectorised(pod, snapshot, table, start)
            feasible = _Rows(nodes, rows)
        else:
            feasible, failed, processed = self._find_feasible(pod, snapshot, start)
        next_start = (start + processed) % len(nodes)
        if feasible and self.extenders:
            try:
                outcome = run_filters(self.extenders, pod, list(feasible))
            except ExtenderError as exc:
                raise ExtenderFailure(pod, len(nodes), str(exc)) from exc
            feasible, rows = outcome.feasible, None
            failed = dict(failed)
            for name, reasons in outcome.failed.items():
                failed[name] = (*failed.get(name, ()), *reasons)
        if not feasible:
            raise FitError(pod, len(nodes), dict(failed))
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, processed, 1, next_start, {}, failed)

        totals = self._totals(pod, snapshot, feasible, table, rows)
        best = np.flatnonzero(totals == totals.max())
        # selectHost: kube-scheduler samples a reservoir as it goes; one uniform draw among all the
        # ties gives every tied node the same chance.
        chosen = feasible[int(best[0] if len(best) == 1 else best[rng.randrange(len(best))])].name
        scores = LazyMapping(lambda: dict(zip((n.name for n in feasible), totals.tolist(), strict=True)))
        return ScheduleResult(chosen, processed, len(feasible), next_start, scores, failed)

    def _prefilter(self, pod: Pod, snapshot: Snapshot) -> list[tuple[Predicate, Any]] | Reject:
        """Each predicate's per-pod state, in order, leaving out those that pass every node."""
        states, reject = prefilter(pod, snapshot, self.predicates)
        if reject is not None:
            return reject
        return [(predicate, state) for predicate, state in states if state is not SKIP]

    def _find_feasible(
        self, pod: Pod, snapshot: Snapshot, start: int
    ) -> tuple[list[NodeInfo], Mapping[str, tuple[str, ...]], int]:
        nodes = snapshot.nodes
        filters = self._prefilter(pod, snapshot)
        if isinstance(filters, Reject):
            # Every node gets the reasons, and the search does not move on (1.20).
            return [], dict.fromkeys((n.name for n in nodes), filters.reasons), 0
        count = len(nodes)
        wanted = self.num_feasible_nodes_to_find(count)
        feasible: list[NodeInfo] = []
        failed: dict[str, tuple[str, ...]] = {}
        processed = 0
        for i in range(count):
            node = nodes[(start + i) % count]
            processed += 1
            reasons = self._reasons(pod, filters, node)
            if reasons:
                failed[node.name] = reasons
                continue
            feasible.append(node)
            if len(feasible) >= wanted:
                break
        return feasible, failed, processed

    def _reasons(self, pod: Pod, filters: Sequence[tuple[Predicate, Any]], node: NodeInfo) -> tuple[str, ...]:
        """Why `pod` does not fit `node`: the first failing filter's reasons, or every failing
        filter's with alwaysCheckAllPredicates; empty when it fits."""
        reasons: list[str] = []
        for _, found in node_failures(pod, filters, node):
            reasons.extend(found)
            if not self.always_check_all_predicates:
                break
        return tuple(reasons)

    def _find_feasible_vectorised(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, start: int
    ) -> tuple[npt.NDArray[np.int64], Mapping[str, tuple[str, ...]], int]:
        """`_find_feasible` with the vectorised filters run over every node at once.

        The same nodes, in the same order, come out: a node passes when every filter passes it, so
        the masks combine in any order; the filters without a vectorised form then run per node, in
        rotation order, on the nodes the masks left, until enough are feasible. The reasons of the
        failed nodes are worked out per node, and only if somebody reads them.
        """
        nodes = snapshot.nodes
        filters = self._prefilter(pod, snapshot)
        if isinstance(filters, Reject):
            return np.array([], dtype=np.int64), dict.fromkeys((n.name for n in nodes), filters.reasons), 0
        count = len(nodes)
        wanted = self.num_feasible_nodes_to_find(count)
        fails = ~table.columns.valid
        per_node: list[tuple[Predicate, Any]] = []
        for predicate, state in filters:
            mask = predicate.filter_nodes(pod, state, table)
            if mask is None:
                per_node.append((predicate, state))
            else:
                fails = fails | mask
        order = (np.arange(count) + start) % count
        passing = ~fails[order]
        if not per_node:
            found = np.cumsum(passing)
            processed = int(np.searchsorted(found, wanted) + 1) if found[-1] >= wanted else count
            examined = order[:processed]
            feasible_rows = examined[passing[:processed]]
            failed_rows = examined[~passing[:processed]]
        else:
            feasible_list: list[int] = []
            failed_list: list[int] = []
            processed = count
            for position in np.flatnonzero(passing).tolist():
                row = int(order[position])
                if any(predicate.filter(pod, state, nodes[row]) for predicate, state in per_node):
                    failed_list.append(row)
                    continue
                feasible_list.append(row)
                if len(feasible_list) >= wanted:
                    processed = position + 1
                    break
            examined = order[:processed]
            failed_rows = np.concatenate(
                [examined[~passing[:processed]], np.array(failed_list, dtype=np.int64)]
            )
            feasible_rows = np.array(feasible_list, dtype=np.int64)
        failed = LazyMapping(lambda: self._reasons_of(pod, filters, nodes, failed_rows))
        return feasible_rows, failed, processed

    def _reasons_of(
        self,
        pod: Pod,
        filters: Sequence[tuple[Predicate, Any]],
        nodes: Sequence[NodeInfo],
        rows: npt.NDArray[np.int64],
    ) -> dict[str, tuple[str, ...]]:
        ordered = sorted(rows.tolist())
        return {nodes[i].name: self._reasons(pod, filters, nodes[i]) for i in ordered}

    def prioritize(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> list[int]:
        """Weighted sum of every priority's normalised scores plus the extenders' scores; all 1
        with neither, as 1.20 does."""
        table = snapshot.table() if self.vectorised else None
        rows = None if table is None else np.array([snapshot.index[n.name] for n in nodes], dtype=np.int64)
        totals: list[int] = self._totals(pod, snapshot, nodes, table, rows).tolist()
        return totals

    def _totals(
        self,
        pod: Pod,
        snapshot: Snapshot,
        nodes: Sequence[NodeInfo],
        table: NodeTable | None,
        rows: npt.NDArray[np.int64] | None,
    ) -> npt.NDArray[np.int64]:
        if not self.priorities and not self.extenders:
            return np.ones(len(nodes), dtype=np.int64)
        totals = np.zeros(len(nodes), dtype=np.int64)
        for weighted in self.priorities:
            vector = None
            if table is not None and rows is not None:
                vector = weighted.priority.score_nodes(pod, snapshot, table, rows, nodes)
            if vector is None:
                vector = np.array(priority_scores(weighted.priority, pod, snapshot, nodes), dtype=np.int64)
            totals += vector * weighted.weight
        if self.extenders:
            extra = run_prioritizers(self.extenders, pod, nodes)
            totals += np.array([extra.get(node.name, 0) for node in nodes], dtype=np.int64)
        return totals


class _Rows(Sequence[NodeInfo]):
    """The NodeInfos at `rows`, made only when read: vectorised priorities never read them."""

    def __init__(self, nodes: Sequence[NodeInfo], rows: npt.NDArray[np.int64]) -> None:
        self._nodes = nodes
        self._array = rows
        self._list: list[int] | None = None  # the rows as Python ints, made when iterated

    def _rows(self) -> list[int]:
        if self._list is None:
            self._list = self._array.tolist()
        return self._list

    def __len__(self) -> int:
        return len(self._array)

    def __iter__(self) -> Iterator[NodeInfo]:
        nodes = self._nodes
        return (nodes[r] for r in self._rows())

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[NodeInfo]: ...
    def __getitem__(self, i: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        if isinstance(i, slice):
            return [self._nodes[r] for r in self._rows()[i]]
        return self._nodes[int(self._array[i])]


class LazyMapping(Mapping[K, V]):
    """A mapping worked out on first read: the failed nodes' reasons and the scores of a pod that
    fits are rarely read, and making them would cost more than the decision."""

    def __init__(self, compute: Callable[[], dict[K, V]]) -> None:
        self._compute: Callable[[], dict[K, V]] | None = compute
        self._reasons: dict[K, V] = {}

    def _get(self) -> dict[K, V]:
        if self._compute is not None:
            self._reasons, self._compute = self._compute(), None
        return self._reasons

    def __getitem__(self, key: K) -> V:
        return self._get()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def prefilter(
    pod: Pod, snapshot: Snapshot, predicates: Iterable[Predicate], *, past_reject: bool = False
) -> tuple[list[tuple[Predicate, Any]], Reject | None]:
    """Each predicate paired with its per-pod state (PreFilter), in order, SKIP included; and the
    first Reject, if any.

    A Reject fails the pod on every node, so the predicates after it are not asked, unless
    `past_reject` (explain reports every predicate's reasons).
    """
    states: list[tuple[Predicate, Any]] = []
    reject: Reject | None = None
    for predicate in predicates:
        state = predicate.prefilter(pod, snapshot)
        states.append((predicate, state))
        if isinstance(state, Reject) and reject is None:
            reject = state
            if not past_reject:
                break
    return states, reject


def node_failures(
    pod: Pod, filters: Iterable[tuple[Predicate, Any]], node: NodeInfo
) -> Iterator[tuple[Predicate, Sequence[str]]]:
    """The filters `pod` fails on `node`, in evaluation order, each with its reasons: the caller
    stops at the first or reads them all.

    `filters` pairs each predicate with its prefilter state: SKIP passes every node, a Reject fails
    every node with its reasons. ValidNode comes first, alone: an unparsable node's allocatable and
    taints are unknown, so no other reason would mean anything.
    """
    invalid = _VALID_NODE.filter(pod, None, node)
    if invalid:
        yield _VALID_NODE, invalid
        return
    for predicate, state in filters:
        if state is SKIP:
            continue
        reasons = state.reasons if isinstance(state, Reject) else predicate.filter(pod, state, node)
        if reasons:
            yield predicate, reasons


def priority_scores(priority: Priority, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> list[int]:
    """One priority's normalised scores for `nodes` (prescore, score, normalize)."""
    state = priority.prescore(pod, snapshot, nodes)
    scores = [priority.score(pod, state, node) for node in nodes]
    priority.normalize(pod, state, nodes, scores)
    return scores
