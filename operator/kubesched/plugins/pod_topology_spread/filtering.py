"""EvenPodsSpread (plugin PodTopologySpread, filter part): topologySpreadConstraints with
whenUnsatisfiable DoNotSchedule.

For each constraint, the pods matching its selector are counted per topology value over the
nodes that pass the pod's nodeSelector and required node affinity and carry every constraint's
key; a node fits when its domain's count, plus one if the pod matches itself, minus the smallest
count does not exceed maxSkew. A node without a constraint's key does not fit. Also the parsed
constraints and the default constraints both halves of the plugin share.

The constraint fields newer than 1.20 follow kube-scheduler 1.32 (podtopologyspread/common.go,
filtering.go): `matchLabelKeys` (the pod's values for those keys ANDed into the selector, keys the
pod lacks ignored), `minDomains` (while fewer domains are eligible, the global minimum is 0),
`nodeAffinityPolicy` (Honor, the default: only nodes matching the pod's nodeSelector and required
node affinity count; Ignore: every node) and `nodeTaintsPolicy` (Ignore, the default; Honor: nodes
with a NoSchedule or NoExecute taint the pod does not tolerate do not count). A pod that uses any
of them, or that is spread by a policy's `podTopologySpreadDefaultConstraints`, is spread by 1.32's
rules; every other pod by 1.20's, which differ from 1.32's for such a pod in these ways, kept so
that its placement stays exactly kube-scheduler 1.20's:

- 1.20 counts the matching pods of every node whose domain some eligible node has, even a node
  that fails the pod's node affinity or lacks another constraint's key; 1.32 counts only the
  nodes that pass the inclusion policies and carry every key.
- The score of a node is truncated to an integer in 1.20 and rounded in 1.32 (scoring.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import LabelSelector, SelectorError
from kubesched.model.table import BoolArray, IntArray, NodeTable
from kubesched.plugins.arguments import ArgumentError
from kubesched.plugins.framework import FITS, SKIP, PluginSettings, Predicate, Reject
from kubesched.plugins.helper import snapshot_default_selector
from kubesched.plugins.node_affinity.filtering import NodeAffinityState, affinity_mask, node_affinity_state
from kubesched.plugins.taint_toleration.filtering import first_untolerated_of

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
_MAX_INT32: Final = 2**31 - 1
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"
NODE_INCLUSION_POLICIES: Final = (HONOR, IGNORE)
# The topologySpreadConstraint fields kube-scheduler 1.20 does not know.
NEWER_FIELDS: Final = ("matchLabelKeys", "minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy")
# helper.DoNotScheduleTaintsFilterFunc: the taints nodeTaintsPolicy Honor looks at.
_DO_NOT_SCHEDULE_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """topologySpreadConstraint: a constraint with its selector parsed (matchLabelKeys merged in)
    and 1.32's defaults for the fields it leaves out."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def includes(self, pod: Pod, affinity: NodeAffinityState | None, node: NodeInfo) -> bool:
        """matchNodeInclusionPolicies: whether the node's pods and domain count for this constraint."""
        if (
            self.node_affinity_policy == HONOR
            and affinity is not None
            and not affinity.matches(node.node.labels, node.name)
        ):
            return False
        return (
            self.node_taints_policy != HONOR
            or first_untolerated_of(pod, node.node.taints, _DO_NOT_SCHEDULE_EFFECTS) is None
        )


# systemDefaultConstraints (used when the DefaultPodTopologySpread gate is on and the policy
# names SelectorSpreadPriority); their selector comes from the pod's Services and controllers.
SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    SpreadConstraint(3, HOSTNAME_LABEL, LabelSelector(), SCHEDULE_ANYWAY),
    SpreadConstraint(5, ZONE_LABEL, LabelSelector(), SCHEDULE_ANYWAY),
)


def _is_set(value: Any) -> bool:
    return value is not None and value != []


def uses_newer_fields(pod: Pod) -> bool:
    """Whether any of the pod's constraints sets a field 1.20 does not know."""
    for raw in pod.spec.get("topologySpreadConstraints") or ():
        if isinstance(raw, Mapping) and any(_is_set(raw.get(key)) for key in NEWER_FIELDS):
            return True
    return False


def follows_current_rules(pod: Pod, policy_defaults: Sequence[SpreadConstraint]) -> bool:
    """Whether the pod is spread by 1.32's rules: it uses a newer field, or has no constraints of
    its own and the policy sets default constraints (a 1.32 setting)."""
    if pod.spec.get("topologySpreadConstraints"):
        return uses_newer_fields(pod)
    return bool(policy_defaults)


def _newer_fields(raw: Mapping[str, Any]) -> tuple[int, str, str]:
    """minDomains, nodeAffinityPolicy and nodeTaintsPolicy, checked, with 1.32's defaults."""
    min_domains = raw.get("minDomains")
    if min_domains is None:
        min_domains = 1
    elif not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains < 1:
        raise SelectorError(f"minDomains must be an integer greater than zero, got {min_domains!r}")
    policies = []
    for key, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        policy = raw.get(key)
        if policy is None:
            policy = default
        elif policy not in NODE_INCLUSION_POLICIES:
            raise SelectorError(f"{key} must be Honor or Ignore, got {policy!r}")
        policies.append(str(policy))
    return min_domains, policies[0], policies[1]


def _with_match_label_keys(selector: LabelSelector, keys: Any, labels: Mapping[str, str]) -> LabelSelector:
    """mergeLabelSetWithSelector: the pod's values for `keys` ANDed in; a nil selector is dropped."""
    if not keys:
        return selector
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise SelectorError(f"matchLabelKeys must be a list of label keys, got {keys!r}")
    values = {key: labels[key] for key in keys if key in labels}
    if not values:
        return selector
    return LabelSelector.from_map(values).add(selector.requirements)


def pod_constraints(pod: Pod, action: str) -> tuple[SpreadConstraint, ...]:
    """filterTopologySpreadConstraints on the pod's own constraints; raises SelectorError."""
    found = []
    for raw in pod.spec.get("topologySpreadConstraints") or ():
        if not isinstance(raw, Mapping) or raw.get("whenUnsatisfiable") != action:
            continue
        max_skew = raw.get("maxSkew")
        if not isinstance(max_skew, int):
            raise SelectorError(f"maxSkew must be an integer, got {max_skew!r}")
        selector = LabelSelector.parse(raw.get("labelSelector"))
        selector = _with_match_label_keys(selector, raw.get("matchLabelKeys"), pod.labels)
        min_domains, affinity_policy, taints_policy = _newer_fields(raw)
        key = str(raw.get("topologyKey") or "")
        found.append(
            SpreadConstraint(max_skew, key, selector, action, min_domains, affinity_policy, taints_policy)
        )
    return tuple(found)


_DEFAULT_CONSTRAINT_FIELDS: Final = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
)


def parse_default_constraints(raw: Any) -> tuple[SpreadConstraint, ...]:
    """PodTopologySpreadArgs.defaultConstraints (List defaulting), validated as 1.32's
    validateDefaultConstraints does; their selector is each pod's own. Raises ArgumentError."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ArgumentError("", f"must be a list of constraints, got {raw!r}")
    found: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(raw):
        path = f"[{i}]"
        if not isinstance(entry, Mapping):
            raise ArgumentError(path, f"must be an object, got {entry!r}")
        for key in entry:
            if key not in _DEFAULT_CONSTRAINT_FIELDS:
                # labelSelector and matchLabelKeys included: the selector is each pod's Services'
                # and controllers', so they would have no effect.
                accepted = ", ".join(_DEFAULT_CONSTRAINT_FIELDS)
                raise ArgumentError(f"{path}.{key}", f"unknown field (accepted: {accepted})")
        max_skew = entry.get("maxSkew")
        if not isinstance(max_skew, int) or isinstance(max_skew, bool) or max_skew < 1:
            raise ArgumentError(f"{path}.maxSkew", f"must be an integer greater than zero, got {max_skew!r}")
        key = entry.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise ArgumentError(f"{path}.topologyKey", f"must be a non-empty string, got {key!r}")
        action = entry.get("whenUnsatisfiable")
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ArgumentError(
                f"{path}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {action!r}"
            )
        if (key, action) in seen:
            raise ArgumentError(path, f"duplicate constraint on {key!r} for {action}")
        seen.add((key, action))
        try:
            min_domains, affinity_policy, taints_policy = _newer_fields(entry)
        except SelectorError as exc:
            raise ArgumentError(path, str(exc)) from exc
        found.append(
            SpreadConstraint(
                max_skew, key, LabelSelector(), str(action), min_domains, affinity_policy, taints_policy
            )
        )
    return tuple(found)


def constraints_for(
    pod: Pod, action: str, defaults: Sequence[SpreadConstraint], snapshot: Snapshot
) -> tuple[SpreadConstraint, ...]:
    """The pod's own constraints of `action`, or, when it has none at all, the defaults of that
    action with the selector of its Services and controllers (buildDefaultConstraints)."""
    if pod.spec.get("topologySpreadConstraints"):
        return pod_constraints(pod, action)
    wanted = [c for c in defaults if c.when_unsatisfiable == action]
    if not wanted:
        return ()
    selector = snapshot_default_selector(pod, snapshot)
    if selector.empty:
        return ()
    return tuple(replace(c, selector=selector) for c in wanted)


def has_all_keys(labels: Mapping[str, str], constraints: Sequence[SpreadConstraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints."""
    for c in constraints:  # noqa: SIM110  (a loop: called for every node of every pod)
        if c.topology_key not in labels:
            return False
    return True


def count_matching(node: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    """countPodsMatchSelector: the namespace's pods on the node that match, terminating ones aside."""
    count = 0
    for pod in node.pods.values():
        if not pod.deleting and pod.namespace == namespace and selector.matches(pod.labels):
            count += 1
    return count


class MatchCounter:
    """count_matching for one selector, remembered for the rest of the batch: the pods of one
    controller, scheduled one after another, recount only the nodes that changed. Keyed by the
    NodeInfo object, which the cache replaces on every change (the entry keeps it alive, so its
    id stays unique)."""

    def __init__(self, snapshot: Snapshot, selector: LabelSelector, namespace: str) -> None:
        self._counts: dict[int, tuple[NodeInfo, int]] = snapshot.node_memo.setdefault(
            ("spread", selector, namespace), {}
        )
        self._selector = selector
        self._namespace = namespace

    def __call__(self, node: NodeInfo) -> int:
        entry = self._counts.get(id(node))
        if entry is None:
            entry = (node, count_matching(node, self._selector, self._namespace))
            self._counts[id(node)] = entry
        return entry[1]


@dataclass(frozen=True, slots=True)
class SpreadState:
    constraints: tuple[SpreadConstraint, ...]
    counts: Mapping[tuple[str, str], int]  # (key, value) -> matching pods
    # key -> the global minimum; a key missing (1.32's rules, no eligible domain): no constraint.
    minimum: Mapping[str, int]


def spread_counts(
    pod: Pod, constraints: Sequence[SpreadConstraint], snapshot: Snapshot
) -> dict[tuple[str, str], int]:
    """calPreFilterState's counting: the domains of eligible nodes, then every node's pods."""
    affinity = node_affinity_state(pod)
    counts: dict[tuple[str, str], int] = {}
    for node in snapshot.nodes:
        labels = node.node.labels
        if affinity is not None and not affinity.matches(labels, node.name):
            continue
        if not has_all_keys(labels, constraints):
            continue
        for c in constraints:
            counts[(c.topology_key, labels[c.topology_key])] = 0
    if not counts:
        return counts
    # A node outside the eligible ones still counts when its domain is one of theirs, as in 1.20.
    counters = [(c.topology_key, MatchCounter(snapshot, c.selector, pod.namespace)) for c in constraints]
    for node in snapshot.nodes:
        if not node.pods:
            continue
        labels = node.node.labels
        for key, counter in counters:
            pair = (key, labels.get(key, ""))
            if pair in counts:
                counts[pair] += counter(node)
    return counts


def current_spread_counts(
    pod: Pod, constraints: Sequence[SpreadConstraint], snapshot: Snapshot
) -> dict[tuple[str, str], int]:
    """1.32's calPreFilterState counting: every node carrying all the keys counts, for each
    constraint whose inclusion policies admit it, its pods in its domain."""
    affinity = node_affinity_state(pod)
    counts: dict[tuple[str, str], int] = {}
    counters = [(c, MatchCounter(snapshot, c.selector, pod.namespace)) for c in constraints]
    for node in snapshot.nodes:
        labels = node.node.labels
        if not has_all_keys(labels, constraints):
            continue
        for c, counter in counters:
            if c.includes(pod, affinity, node):
                pair = (c.topology_key, labels[c.topology_key])
                counts[pair] = counts.get(pair, 0) + counter(node)
    return counts


def current_minimum(
    constraints: Sequence[SpreadConstraint], counts: Mapping[tuple[str, str], int]
) -> dict[str, int]:
    """1.32's minMatchNum per key: 0 while fewer domains than minDomains are eligible; no entry
    for a key without any eligible domain (1.32 then skips the constraint)."""
    by_key: dict[str, list[int]] = {}
    for (key, _), count in counts.items():
        by_key.setdefault(key, []).append(count)
    minimum: dict[str, int] = {}
    for c in constraints:
        found = by_key.get(c.topology_key)
        if found:
            minimum[c.topology_key] = 0 if len(found) < c.min_domains else min(found)
    return minimum


class SpreadFilterState:
    """PreFilter's state: the pod's DoNotSchedule constraints, counted on first use by the per-node
    Filter, walking every node (the reference); the vectorised `filter_nodes` counts over arrays."""

    __slots__ = ("_counted", "constraints", "current", "pod", "snapshot")

    def __init__(
        self, pod: Pod, constraints: tuple[SpreadConstraint, ...], current: bool, snapshot: Snapshot
    ) -> None:
        self.pod = pod
        self.constraints = constraints
        self.current = current  # spread by 1.32's rules
        self.snapshot = snapshot
        self._counted: SpreadState | None = None

    def counted(self) -> SpreadState:
        if self._counted is None:
            pod, constraints = self.pod, self.constraints
            if self.current:
                counts = current_spread_counts(pod, constraints, self.snapshot)
                self._counted = SpreadState(constraints, counts, current_minimum(constraints, counts))
            else:
                counts = spread_counts(pod, constraints, self.snapshot)
                minimum: dict[str, int] = {c.topology_key: _MAX_INT32 for c in constraints}
                for (key, _), count in counts.items():
                    minimum[key] = min(minimum[key], count)
                self._counted = SpreadState(constraints, counts, minimum)
        return self._counted


class EvenPodsSpread(Predicate):
    name = "EvenPodsSpread"
    unresolvable_reasons = frozenset({ERR_REASON_NODE_LABEL_NOT_MATCH})
    pod_dependent = True

    def __init__(self, default_constraints: Sequence[SpreadConstraint] = ()) -> None:
        # A policy's podTopologySpreadDefaultConstraints; 1.20's system defaults have no
        # DoNotSchedule constraint, so without a policy list no default filters.
        self.default_constraints = tuple(default_constraints)

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> Predicate:
        return cls(parse_default_constraints(list(settings.default_constraints) or None))

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if not pod.spec.get("topologySpreadConstraints") and not self.default_constraints:
            return SKIP
        try:
            constraints = constraints_for(pod, DO_NOT_SCHEDULE, self.default_constraints, snapshot)
        except SelectorError as exc:
            return Reject((f"obtaining pod's hard topology spread constraints: {exc}",))
        if not constraints:
            return SKIP
        return SpreadFilterState(
            pod, constraints, follows_current_rules(pod, self.default_constraints), snapshot
        )

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        counted = state.counted()
        labels = node.node.labels
        for c in counted.constraints:
            value = labels.get(c.topology_key)
            if value is None:
                return (ERR_REASON_NODE_LABEL_NOT_MATCH,)
            minimum = counted.minimum.get(c.topology_key)
            if minimum is None:
                continue
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = counted.counts.get((c.topology_key, value), 0) + self_match - minimum
            if skew > c.max_skew:
                return (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
        return FITS

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        """`filter` over arrays, for a pod spread by 1.20's rules (1.32's inclusion policies: per node)."""
        if state.current:
            return None
        constraints: tuple[SpreadConstraint, ...] = state.constraints
        columns = table.columns
        eligible: BoolArray = np.ones(table.count, dtype=np.bool_)
        affinity = state.snapshot.parsed(pod, node_affinity_state)
        if affinity is not None:
            matching_nodes = affinity_mask(affinity, table)
            if matching_nodes is None:
                return None  # matchFields: per node
            eligible = matching_nodes
        for c in constraints:
            eligible = eligible & columns.has_label(c.topology_key)
        # Per key: the count of each eligible domain (0 elsewhere, and at the trailing code -1) and
        # the smallest of them.
        domains: dict[str, tuple[npt.NDArray[np.int32], IntArray, int]] = {}
        for key in dict.fromkeys(c.topology_key for c in constraints):
            codes, values = columns.label_codes(key)
            is_domain = np.zeros(len(values) + 1, dtype=np.bool_)
            is_domain[codes[eligible]] = True
            # A node without the key counts toward the domain "" (Go's zero value), when there is one.
            counted_codes = codes
            if "" in values:
                counted_codes = np.where(codes < 0, values.index(""), codes).astype(np.int32)
            present = counted_codes >= 0
            totals = np.zeros(len(values) + 1, dtype=np.int64)
            for c in constraints:
                if c.topology_key == key:
                    pods = table.usage.selected(pod.namespace, c.selector)
                    sums = np.bincount(counted_codes[present], weights=pods[present], minlength=len(values))
                    totals[: len(values)] += sums.astype(np.int64)
            totals[~is_domain] = 0
            minimum = int(totals[is_domain].min()) if is_domain.any() else _MAX_INT32
            domains[key] = (codes, totals, minimum)
        fails: BoolArray = np.zeros(table.count, dtype=np.bool_)
        for c in constraints:
            codes, totals, minimum = domains[c.topology_key]
            self_match = 1 if c.selector.matches(pod.labels) else 0
            fails |= (codes < 0) | (totals[codes] + (self_match - minimum) > c.max_skew)
        return fails
