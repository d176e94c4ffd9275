"""EvenPodsSpread (plugin PodTopologySpread, filter part): topologySpreadConstraints with
whenUnsatisfiable DoNotSchedule.

For each constraint, the pods matching its selector are counted per topology value over the
nodes that pass the pod's nodeSelector and required node affinity and carry every constraint's
key; a node fits when its domain's count, plus one if the pod matches itself, minus the smallest
count does not exceed maxSkew. A node without a constraint's key does not fit. Also the parsed
constraints and the default constraints both halves of the plugin share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import LabelSelector, SelectorError
from kubesched.plugins.framework import FITS, SKIP, Predicate, Reject
from kubesched.plugins.helper import default_selector
from kubesched.plugins.node_affinity.filtering import node_affinity_state

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
_MAX_INT32: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """topologySpreadConstraint: a constraint with its selector parsed."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    when_unsatisfiable: str = DO_NOT_SCHEDULE


# systemDefaultConstraints (used when the DefaultPodTopologySpread gate is on and the policy
# names SelectorSpreadPriority); their selector comes from the pod's Services and controllers.
SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    SpreadConstraint(3, HOSTNAME_LABEL, LabelSelector(), SCHEDULE_ANYWAY),
    SpreadConstraint(5, ZONE_LABEL, LabelSelector(), SCHEDULE_ANYWAY),
)


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
        found.append(SpreadConstraint(max_skew, str(raw.get("topologyKey") or ""), selector, action))
    return tuple(found)


def constraints_for(
    pod: Pod, action: str, defaults: Sequence[SpreadConstraint], objects: ClusterObjects
) -> tuple[SpreadConstraint, ...]:
    """The pod's own constraints of `action`, or, when it has none at all, the defaults of that
    action with the selector of its Services and controllers (buildDefaultConstraints)."""
    if pod.spec.get("topologySpreadConstraints"):
        return pod_constraints(pod, action)
    wanted = [c for c in defaults if c.when_unsatisfiable == action]
    if not wanted:
        return ()
    selector = default_selector(pod, objects)
    if selector.empty:
        return ()
    return tuple(SpreadConstraint(c.max_skew, c.topology_key, selector, action) for c in wanted)


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
    minimum: Mapping[str, int]  # key -> smallest count over its values


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


class EvenPodsSpread(Predicate):
    name = "EvenPodsSpread"
    unresolvable_reasons = frozenset({ERR_REASON_NODE_LABEL_NOT_MATCH})
    pod_dependent = True

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if not pod.spec.get("topologySpreadConstraints"):
            # The default constraints applied to the filter are the DoNotSchedule ones: the
            # system defaults have none.
            return SKIP
        try:
            constraints = pod_constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError as exc:
            return Reject((f"obtaining pod's hard topology spread constraints: {exc}",))
        if not constraints:
            return SKIP
        counts = spread_counts(pod, constraints, snapshot)
        minimum: dict[str, int] = {c.topology_key: _MAX_INT32 for c in constraints}
        for (key, _), count in counts.items():
            minimum[key] = min(minimum[key], count)
        return SpreadState(constraints, counts, minimum)

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        labels = node.node.labels
        for c in state.constraints:
            value = labels.get(c.topology_key)
            if value is None:
                return (ERR_REASON_NODE_LABEL_NOT_MATCH,)
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = state.counts.get((c.topology_key, value), 0) + self_match - state.minimum[c.topology_key]
            if skew > c.max_skew:
                return (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
        return FITS
