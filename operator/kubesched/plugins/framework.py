"""The shapes every predicate and priority takes, after kube-scheduler's framework plugins.

A predicate answers per node with the reasons it does not fit (empty: it fits). A priority
scores each feasible node 0..MAX_NODE_SCORE and may normalise the scores across nodes.
Both may precompute per pod once (`prefilter` / `prescore`), so per-node work stays small.

A predicate also declares its traits as class attributes (`unresolvable_reasons`, `pod_dependent`,
`requeue_on`), which plugins/registry.py gathers for preemption and the scheduling queue; a
priority has none, since it never rejects a pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import BoolArray, IntArray, NodeTable

MAX_NODE_SCORE = 100
FITS: tuple[str, ...] = ()


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


# Returned by `prefilter` when the pod passes this predicate on every node (no ports, no volumes,
# no selector...): the algorithm then never calls `filter`, which keeps the per-node loop short.
SKIP: Final = _Skip()


@dataclass(frozen=True, slots=True)
class Reject:
    """Returned by `prefilter` when the pod fits no node at all, for `reasons` (a PreFilter plugin's
    UnschedulableAndUnresolvable status in 1.20: every node gets the same reasons)."""

    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PluginSettings:
    """Policy-wide settings some plugins read, and the 1.20 feature gate that changes a mapping."""

    hard_pod_affinity_symmetric_weight: int = 1
    # DefaultPodTopologySpread (beta, on in 1.20): SelectorSpreadPriority runs as PodTopologySpread
    # with the system default constraints; off, as the older SelectorSpread plugin.
    default_pod_topology_spread: bool = True
    # Extended resources extenders manage with ignoredByScheduler: PodFitsResources skips them.
    ignored_resources: frozenset[str] = frozenset()
    # $KUBE_MAX_PD_VOLS (getMaxVolLimitFromEnv), read where the policy is compiled: the in-tree
    # volume limits use it instead of their defaults when positive; -1: not set.
    max_pd_volumes: int = -1
    # The policy's podTopologySpreadDefaultConstraints as given (PodTopologySpreadArgs'
    # defaultConstraints with List defaulting), validated where the policy is compiled; the
    # PodTopologySpread plugin parses them. Empty: 1.20's system defaults.
    default_constraints: tuple[Mapping[str, Any], ...] = ()


class Predicate:
    """A filter. Subclasses set `name` (the legacy Policy name), implement `filter` and declare
    their traits, which preemption and the scheduling queue read."""

    name: ClassVar[str]
    # Its reasons no eviction can resolve: 1.20's UnschedulableAndUnresolvable statuses, and for
    # the predicates 1.20 no longer has, 1.17's unresolvablePredicateFailureErrors.
    unresolvable_reasons: ClassVar[frozenset[str]] = frozenset()
    # Its per-pod state counts the pods of other nodes, so preemption re-runs `prefilter` for each
    # candidate node (1.20 updates such state through PreFilterExtensions AddPod/RemovePod).
    pod_dependent: ClassVar[bool] = False
    # Kinds of cluster object whose add or update may make a pod it rejected schedulable.
    requeue_on: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def is_unresolvable(cls, reason: str) -> bool:
        """Whether `reason`, one of this predicate's, is beyond what any eviction could change."""
        return reason in cls.unresolvable_reasons

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> Predicate:
        """The filter a policy entry without an argument enables."""
        return cls()

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> Predicate:
        """The filter a policy entry's argument configures (argument-taking predicates only)."""
        raise NotImplementedError

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        """Per-pod state handed to every `filter` call of this cycle, SKIP when every node passes,
        or a Reject when none can."""
        return None

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        """The reasons `pod` cannot go to `node`; empty when it fits."""
        raise NotImplementedError

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        """`filter` over every node at once: the mask of the nodes that fail, or None when this
        predicate has no vectorised form for this pod (then `filter` runs per node)."""
        return None

    def merge(self, other: Predicate) -> Predicate:
        """The filter that runs when two policy entries enable this one (same `name`).

        Most filters take no configuration, so the first one stays; the argument-taking ones
        (custom CheckNodeLabelPresence, CheckServiceAffinity predicates) combine their arguments
        into one filter, as 1.20 configures one plugin for them.
        """
        return self


# How the weight of a priority that several policy entries configure is found (1.20's
# appendToPluginSet keeps the largest; NodeLabel and ServiceAffinity producers multiply the
# common weight by the number of entries).
WeightRule = Literal["single", "max", "sum"]


class Priority:
    """A scorer. Subclasses set `name` (the legacy Policy name) and implement `score`.

    `plugin` names the 1.20 score plugin behind it: entries of one policy whose priorities share a
    plugin become one priority (`merge`), weighted by `weight_rule`.
    """

    name: ClassVar[str]
    plugin: ClassVar[str] = ""
    weight_rule: ClassVar[WeightRule] = "single"

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> Priority:
        """The priority a policy entry without an argument configures."""
        return cls()

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> Priority:
        """The priority a policy entry's argument configures (argument-taking priorities only)."""
        raise NotImplementedError

    def merge(self, other: Priority) -> Priority:
        """The priority two entries with the same plugin make together."""
        raise ValueError(f"{self.name} and {other.name} cannot be combined")

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        """Per-pod state handed to every `score` call of this cycle; `nodes` are the feasible ones."""
        return None

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        raise NotImplementedError

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        """prescore, score and normalize at once for the feasible `nodes` (at `rows` of `table`):
        their final scores, or None when this priority has no vectorised form for this pod."""
        return None

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        """Rescale `scores` (aligned with `nodes`) in place; most priorities need nothing."""
