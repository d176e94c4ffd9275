"""EvenPodsSpreadPriority, and SelectorSpreadPriority / ServiceSpreadingPriority as kube-scheduler
1.20 runs them by default (plugin PodTopologySpread, score part).

The pod's ScheduleAnyway topologySpreadConstraints, or, for a pod that has no constraints at
all, default constraints with the selector of its Services and controllers: none for
EvenPodsSpreadPriority alone; the system defaults (hostname, maxSkew 3; zone, maxSkew 5) once the
policy names SelectorSpreadPriority. That last mapping is 1.20's with the DefaultPodTopologySpread
feature gate on, its default: with the gate off (`PluginSettings.default_pod_topology_spread`),
SelectorSpreadPriority is the older SelectorSpread plugin (plugins/selector_spread/) instead.

Both names configure one plugin in 1.20, so a policy naming both gets one priority, weighted by the
larger of the two weights.

A policy's `podTopologySpreadDefaultConstraints` (1.32's List defaulting) replace the system
defaults for both names.

Each constraint adds `count * log(domains + 2) + maxSkew - 1` for the node's domain, where
`count` is the matching pods in that domain over the nodes passing the pod's node selector and
affinity (for the hostname key, on the node itself). Nodes missing a key score 0; the others
`100 * (max + min - score) / max`.

A pod spread by 1.32's rules (filtering.py says which) counts, for each constraint, the nodes its
inclusion policies admit instead of those passing the node affinity, and its node scores are
rounded rather than truncated; the vectorised path leaves such pods to the per-node one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import SelectorError
from kubesched.model.table import BoolArray, IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, PluginSettings, Priority
from kubesched.plugins.node_affinity.filtering import affinity_mask, node_affinity_state
from kubesched.plugins.pod_topology_spread.filtering import (
    HOSTNAME_LABEL,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULT_CONSTRAINTS,
    MatchCounter,
    SpreadConstraint,
    constraints_for,
    follows_current_rules,
    has_all_keys,
    parse_default_constraints,
)

_IGNORED = -1


@dataclass(frozen=True, slots=True)
class SpreadScoreState:
    constraints: tuple[SpreadConstraint, ...]
    ignored: frozenset[str]  # feasible nodes missing a key
    counts: dict[tuple[str, str], int]
    weights: tuple[float, ...]  # topologyNormalizingWeight per constraint
    counters: tuple[MatchCounter, ...]  # per constraint
    rounded: bool = False  # 1.32's rules round a node's score; 1.20 truncates it


def topology_normalizing_weight(size: int) -> float:
    return math.log(float(size + 2))


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    return float(count) * weight + float(max_skew - 1)


class PodTopologySpreadPriority(Priority):
    name = "EvenPodsSpreadPriority"
    plugin = "PodTopologySpread"
    weight_rule = "max"

    def __init__(
        self, system_defaults: bool = False, default_constraints: Sequence[SpreadConstraint] = ()
    ) -> None:
        self.system_defaults = system_defaults
        # A policy's podTopologySpreadDefaultConstraints, which replace the system defaults.
        self.default_constraints = tuple(default_constraints)

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> Priority:
        return spread_priority(settings, system_defaults=False)

    def merge(self, other: Priority) -> Priority:
        assert isinstance(other, PodTopologySpreadPriority)
        return PodTopologySpreadPriority(
            self.system_defaults or other.system_defaults,
            self.default_constraints or other.default_constraints,
        )

    def _defaults(self) -> tuple[SpreadConstraint, ...]:
        if self.default_constraints:
            return self.default_constraints
        return SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaults else ()

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        try:
            constraints = constraints_for(pod, SCHEDULE_ANYWAY, self._defaults(), snapshot)
        except SelectorError:
            return None  # the API server validates constraints; a broken one spreads nothing
        if not constraints or not nodes or not snapshot.nodes:
            return None
        # initPreScoreState: the domains of the feasible nodes.
        ignored = set()
        counts: dict[tuple[str, str], int] = {}
        sizes = [0] * len(constraints)
        for node in nodes:
            labels = node.node.labels
            if not has_all_keys(labels, constraints):
                ignored.add(node.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == HOSTNAME_LABEL:
                    continue
                pair = (c.topology_key, labels[c.topology_key])
                if pair not in counts:
                    counts[pair] = 0
                    sizes[i] += 1
        weights = tuple(
            topology_normalizing_weight(
                len(nodes) - len(ignored) if c.topology_key == HOSTNAME_LABEL else sizes[i]
            )
            for i, c in enumerate(constraints)
        )
        counters = tuple(MatchCounter(snapshot, c.selector, pod.namespace) for c in constraints)
        current = follows_current_rules(pod, self.default_constraints)
        # The pods of every node that passes the pod's node selector and affinity count (1.32's
        # rules: the nodes each constraint's inclusion policies admit).
        if counts:
            affinity = node_affinity_state(pod)
            keyed = list(zip(constraints, counters, strict=True))
            for node in snapshot.nodes:
                if not node.pods:
                    continue
                labels = node.node.labels
                if not current and affinity is not None and not affinity.matches(labels, node.name):
                    continue
                if not has_all_keys(labels, constraints):
                    continue
                for c, counter in keyed:
                    if current and not c.includes(pod, affinity, node):
                        continue
                    pair = (c.topology_key, labels[c.topology_key])
                    if pair in counts:
                        counts[pair] += counter(node)
        return SpreadScoreState(constraints, frozenset(ignored), counts, weights, counters, current)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        if state is None:
            return 0
        if node.name in state.ignored:
            return _IGNORED
        labels = node.node.labels
        total = 0.0
        for c, weight, counter in zip(state.constraints, state.weights, state.counters, strict=True):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            # Per-node counts for the hostname key, the domain's count for the others.
            count = (
                counter(node) if c.topology_key == HOSTNAME_LABEL else state.counts[(c.topology_key, value)]
            )
            total += score_for_count(count, c.max_skew, weight)
        # Go's math.Round rounds halves away from zero; the total is never negative.
        return math.floor(total + 0.5) if state.rounded else int(total)

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        if state is None:
            # No constraints: 1.20 still normalises the all-zero scores, to 100 everywhere.
            scores[:] = [MAX_NODE_SCORE] * len(scores)
            return
        valid = [s for s in scores if s != _IGNORED]
        min_score = min(valid, default=2**63 - 1)
        max_score = max(valid, default=0)
        for i, score in enumerate(scores):
            if score == _IGNORED:
                scores[i] = 0
            elif max_score == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (max_score + min_score - score) // max_score

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        """prescore, score and normalize over arrays, in the same float64 operations."""
        if follows_current_rules(pod, self.default_constraints):
            return None  # per-constraint inclusion policies: per node
        try:
            constraints = constraints_for(pod, SCHEDULE_ANYWAY, self._defaults(), snapshot)
        except SelectorError:
            constraints = ()
        if not constraints or not nodes or not snapshot.nodes:
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        columns, usage = table.columns, table.usage
        affinity = snapshot.parsed(pod, node_affinity_state)
        eligible: BoolArray = np.ones(table.count, dtype=np.bool_)
        if affinity is not None:
            matching_nodes = affinity_mask(affinity, table)
            if matching_nodes is None:
                return None  # matchFields: per node
            eligible = matching_nodes
        has_all: BoolArray = np.ones(table.count, dtype=np.bool_)
        for c in constraints:
            has_all = has_all & columns.has_label(c.topology_key)
        eligible = eligible & has_all
        scored = has_all[rows]  # the others are ignored
        # Per key other than the hostname, each domain's count: prescore's map has one entry per
        # (key, value), which every constraint with that key adds its matching pods to.
        by_domain: dict[str, IntArray] = {}
        for c in constraints:
            if c.topology_key != HOSTNAME_LABEL:
                codes, values = columns.label_codes(c.topology_key)
                matching = usage.selected(pod.namespace, c.selector)[eligible]
                found = np.bincount(codes[eligible], weights=matching, minlength=max(len(values), 1))
                previous = by_domain.get(c.topology_key)
                by_domain[c.topology_key] = found.astype(np.int64) + (0 if previous is None else previous)
        total = np.zeros(len(rows), dtype=np.float64)
        keys_seen: set[str] = set()
        for c in constraints:
            if c.topology_key == HOSTNAME_LABEL:
                size = int(scored.sum())
                counts = usage.selected(pod.namespace, c.selector)[rows]
                present = columns.has_label(c.topology_key)[rows]
            else:
                codes, values = columns.label_codes(c.topology_key)
                row_codes = codes[rows]
                # A domain counts once, for the first constraint with its key (as prescore's map does).
                first = c.topology_key not in keys_seen
                keys_seen.add(c.topology_key)
                domains = np.bincount(row_codes[scored], minlength=len(values))
                size = int(np.count_nonzero(domains)) if first else 0
                present = row_codes >= 0
                counts = by_domain[c.topology_key][np.where(present, row_codes, 0)]
            weight = topology_normalizing_weight(size)
            term = counts.astype(np.float64) * weight + float(c.max_skew - 1)
            total = total + np.where(present, term, 0.0)
        scores = np.where(scored, total.astype(np.int64), _IGNORED)
        valid = scores[scored]
        if not len(valid):
            return np.zeros(len(rows), dtype=np.int64)
        low, high = int(valid.min()), int(valid.max())
        if high == 0:
            normalised = np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        else:
            normalised = MAX_NODE_SCORE * (high + low - scores) // high
        result: IntArray = np.where(scored, normalised, 0)
        return result


def spread_priority(settings: PluginSettings, *, system_defaults: bool) -> PodTopologySpreadPriority:
    """The priority a policy configures, with the system defaults (SelectorSpreadPriority's mapping)
    or without, and the policy's own default constraints."""
    defaults = parse_default_constraints(list(settings.default_constraints) or None)
    return PodTopologySpreadPriority(system_defaults, defaults)
