"""MatchInterPodAffinity (plugin InterPodAffinity, filter part): required pod affinity and
anti-affinity of the pod, and the required anti-affinity of the pods already placed.

PreFilter counts, per topology pair (key, value), the existing pods matching all of the pod's
affinity terms, those matching each of its anti-affinity terms, and the existing pods whose
anti-affinity terms match the pod; Filter then only looks the node's labels up. The existing
pods' anti-affinity comes from the nodes that hold such pods (Snapshot's index), their terms
parsed once when they joined the node (NodeInfo.pods_with_affinity).

namespaceSelector (1.32): the pod's own terms have theirs resolved into namespace names against
the Namespace objects at PreFilter; an existing pod's term is matched against the labels of the
incoming pod's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.model.affinity import AffinityTerm, PodAffinity, namespace_labels, parse_pod_affinity
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
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
        info = parse_pod_affinity(pod)
        if info.parse_error is not None:
            return Reject((f"parsing pod: {info.parse_error}",))
        info = info.with_namespaces(snapshot.objects.namespaces)
        existing_anti = existing_anti_affinity_counts(pod, snapshot)
        affinity, anti = incoming_counts(info, snapshot)
        if not existing_anti and not info.required_affinity and not info.required_anti_affinity:
            return SKIP
        return InterPodAffinityState(info, existing_anti, affinity, anti)

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        labels = node.node.labels
        if not satisfies_pod_affinity(state, labels):
            return (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
        if not satisfies_pod_anti_affinity(state, labels):
            return (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
        if not satisfies_existing_anti_affinity(state, labels):
            return (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
        return FITS
