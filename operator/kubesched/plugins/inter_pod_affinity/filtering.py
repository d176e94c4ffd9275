"""MatchInterPodAffinity (plugin InterPodAffinity, filter part): required pod affinity and
anti-affinity of the pod, and the required anti-affinity of the pods already placed.

PreFilter counts, per topology pair (key, value), the existing pods matching all of the pod's
affinity terms, those matching each of its anti-affinity terms, and the existing pods whose
anti-affinity terms match the pod; Filter then only looks the node's labels up. The existing
pods' anti-affinity comes from the nodes that hold such pods (Snapshot's index), their terms
parsed once when they joined the node (NodeInfo.pods_with_affinity). The counts are made on the
first per-node Filter: the vectorised `filter_nodes` makes the same decisions from the indexes of
NodeUsage instead (each distinct term of the placed pods matched once against the pod, the pod's
terms once against each distinct label set their selectors allow), per domain over arrays.

namespaceSelector (1.32): the pod's own terms have theirs resolved into namespace names against
the Namespace objects at PreFilter; an existing pod's term is matched against the labels of the
incoming pod's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.model.affinity import AffinityTerm, PodAffinity, namespace_labels, parse_pod_affinity
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podindex import REQUIRED_ANTI_AFFINITY
from kubesched.model.table import BoolArray, IntArray, NodeTable
from kubesched.plugins.framework import FITS, SKIP, Predicate, Reject

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_NOT_MATCH = "node(s) didn't match pod affinity/anti-affinity"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

TopologyCounts = dict[tuple[str, str], int]


def matches_all(pod: Pod, terms: Sequence[AffinityTerm]) -> bool:
    """podMatchesAllAffinityTerms: false for no terms (their namespaceSelectors already resolved)."""
    return bool(terms) and all(term.matches(pod) for term in terms)


def _add(counts: TopologyCounts, term: AffinityTerm, labels: Mapping[str, str]) -> None:
    value = labels.get(term.topology_key)
    if value is not None:
        pair = (term.topology_key, value)
        counts[pair] = counts.get(pair, 0) + 1


def existing_anti_affinity_counts(pod: Pod, snapshot: Snapshot) -> TopologyCounts:
    """getTPMapMatchingExistingAntiAffinity."""
    counts: TopologyCounts = {}
    nodes = snapshot.nodes_with_required_anti_affinity()
    if not nodes:
        return counts
    ns_labels = namespace_labels(snapshot.objects.namespaces, pod.namespace)
    for node in nodes:
        labels = node.node.labels
        for existing in node.pods_with_required_anti_affinity:
            for term in existing.required_anti_affinity:
                if term.matches(pod, ns_labels):
                    _add(counts, term, labels)
    return counts


def incoming_counts(info: PodAffinity, snapshot: Snapshot) -> tuple[TopologyCounts, TopologyCounts]:
    """getTPMapMatchingIncomingAffinityAntiAffinity: every existing pod against the pod's terms."""
    affinity: TopologyCounts = {}
    anti: TopologyCounts = {}
    if not info.required_affinity and not info.required_anti_affinity:
        return affinity, anti
    for node in snapshot.nodes:
        if not node.pods:
            continue
        labels = node.node.labels
        for existing in node.pods.values():
            if matches_all(existing, info.required_affinity):
                for term in info.required_affinity:
                    _add(affinity, term, labels)
            for term in info.required_anti_affinity:
                if term.matches(existing):
                    _add(anti, term, labels)
    return affinity, anti


@dataclass(frozen=True, slots=True)
class InterPodAffinityState:
    info: PodAffinity
    existing_anti: TopologyCounts
    affinity: TopologyCounts
    anti: TopologyCounts


class PreFilterState:
    """The pod's parsed terms; its counts made on first use, walking every pod (the reference)."""

    __slots__ = ("_counted", "info", "snapshot")

    def __init__(self, info: PodAffinity, snapshot: Snapshot) -> None:
        self.info = info
        self.snapshot = snapshot
        self._counted: InterPodAffinityState | None = None

    def counted(self) -> InterPodAffinityState:
        if self._counted is None:
            pod = self.info.pod
            existing_anti = existing_anti_affinity_counts(pod, self.snapshot)
            affinity, anti = incoming_counts(self.info, self.snapshot)
            self._counted = InterPodAffinityState(self.info, existing_anti, affinity, anti)
        return self._counted


def satisfies_pod_affinity(state: InterPodAffinityState, labels: Mapping[str, str]) -> bool:
    pods_exist = True
    for term in state.info.required_affinity:
        value = labels.get(term.topology_key)
        if value is None:
            return False  # all topology labels must exist on the node
        if state.affinity.get((term.topology_key, value), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    # The first pod of a group with affinity to itself: no pod matches anywhere yet, and it
    # matches its own terms.
    return not state.affinity and matches_all(state.info.pod, state.info.required_affinity)


def satisfies_pod_anti_affinity(state: InterPodAffinityState, labels: Mapping[str, str]) -> bool:
    if state.anti:
        for term in state.info.required_anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and state.anti.get((term.topology_key, value), 0) > 0:
                return False
    return True


def satisfies_existing_anti_affinity(state: InterPodAffinityState, labels: Mapping[str, str]) -> bool:
    if state.existing_anti:
        for pair in labels.items():
            if state.existing_anti.get(pair, 0) > 0:
                return False
    return True


class MatchInterPodAffinity(Predicate):
    name = "MatchInterPodAffinity"
    # 1.20 reports only a broken required affinity as unresolvable: evicting pods may lift
    # anti-affinity, never create the pods an affinity term asks for.
    unresolvable_reasons = frozenset({ERR_REASON_AFFINITY_RULES_NOT_MATCH})
    pod_dependent = True

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        info = snapshot.parsed(pod, parse_pod_affinity)
        if info.parse_error is not None:
            return Reject((f"parsing pod: {info.parse_error}",))
        if (
            not info.required_affinity
            and not info.required_anti_affinity
            and not snapshot.has_pods_with_required_anti_affinity()
        ):
            return SKIP
        return PreFilterState(info.with_namespaces(snapshot.objects.namespaces), snapshot)

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        counted = state.counted()
        labels = node.node.labels
        if not satisfies_pod_affinity(counted, labels):
            return (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
        if not satisfies_pod_anti_affinity(counted, labels):
            return (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
        if not satisfies_existing_anti_affinity(counted, labels):
            return (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
        return FITS

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        info: PodAffinity = state.info
        ns_labels = namespace_labels(state.snapshot.objects.namespaces, pod.namespace)
        fails = existing_anti_affinity_mask(pod, ns_labels, table)
        if info.required_affinity:
            fails |= ~pod_affinity_mask(info, table)
        for term in info.required_anti_affinity:
            fails |= term_domains_taken(term, matching_pods(table, (term,)), table)
        return fails


def matching_pods(table: NodeTable, terms: Sequence[AffinityTerm]) -> IntArray:
    """Per node, the placed pods (terminating ones included) matching every one of the incoming
    pod's `terms` (their namespaceSelectors resolved)."""

    def accepts(namespace: str, labels: Mapping[str, str]) -> bool:
        for term in terms:  # noqa: SIM110  (a loop: called for every candidate label set)
            if not term.matches_labels(namespace, labels):
                return False
        return True

    return table.usage.pods_matching(terms[0].selector, accepts, ("pod-affinity", *terms), terminating=True)


def term_domains_taken(term: AffinityTerm, pods: IntArray, table: NodeTable) -> BoolArray:
    """The nodes whose domain of the term's topology key holds any of `pods` (none without the key)."""
    taken: BoolArray = table.columns.domain_totals(term.topology_key, pods) > 0
    return taken


def pod_affinity_mask(info: PodAffinity, table: NodeTable) -> BoolArray:
    """satisfies_pod_affinity for every node."""
    terms = info.required_affinity
    pods = matching_pods(table, terms)
    has_keys = np.ones(table.count, dtype=np.bool_)
    pods_exist = np.ones(table.count, dtype=np.bool_)
    any_matching = False
    for term in terms:
        in_domain = table.columns.domain_totals(term.topology_key, pods)
        has_keys &= table.columns.has_label(term.topology_key)
        pods_exist &= in_domain > 0
        any_matching = any_matching or bool(in_domain.any())
    if not any_matching and matches_all(info.pod, terms):
        # The first pod of a group with affinity to itself: every node with the keys.
        return has_keys
    return has_keys & pods_exist


def existing_anti_affinity_mask(pod: Pod, ns_labels: Mapping[str, str], table: NodeTable) -> BoolArray:
    """satisfies_existing_anti_affinity failing, for every node: each distinct required
    anti-affinity term of the placed pods is matched against the pod once, and the domains of the
    nodes holding pods with a matching term are taken."""
    nodes = table.columns.nodes
    taken: dict[str, set[str]] = {}
    for (role, _, term), rows in table.usage.placed_terms(pod.labels):
        if role != REQUIRED_ANTI_AFFINITY or not term.matches(pod, ns_labels):
            continue
        key = term.topology_key
        for row in rows:
            value = nodes[row].labels.get(key)
            if value is not None:
                taken.setdefault(key, set()).add(value)
    fails = np.zeros(table.count, dtype=np.bool_)
    for key, values in taken.items():
        fails |= table.columns.with_label_in(key, values)
    return fails
