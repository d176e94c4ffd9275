"""A pod's inter-pod affinity terms, parsed once (framework.PodInfo / NewPodInfo in 1.20).

NodeInfo keeps the parsed terms of the pods it holds that have any pod (anti-)affinity, so the
affinity filter and priority never re-parse an existing pod's selectors. A term whose selector
does not parse makes the whole group empty and sets `parse_error`, as NewPodInfo does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.model.objects import Pod
from kubesched.model.selectors import LabelSelector, SelectorError


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One PodAffinityTerm: the namespaces and selector a pod must match, and the topology key."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str

    def matches(self, pod: Pod) -> bool:
        """PodMatchesTermsNamespaceAndSelector."""
        return pod.namespace in self.namespaces and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """The parsed (anti-)affinity of one pod."""

    pod: Pod
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    parse_error: str | None = None


def has_pod_affinity(pod: Pod) -> bool:
    """podWithAffinity: any podAffinity or podAntiAffinity, even an empty one."""
    affinity = pod.spec.get("affinity")
    return isinstance(affinity, Mapping) and (
        affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None
    )


def _term(pod: Pod, raw: Any) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"a pod affinity term must be an object, got {raw!r}")
    namespaces = raw.get("namespaces") or [pod.namespace]
    return AffinityTerm(
        frozenset(str(n) for n in namespaces),
        LabelSelector.parse(raw.get("labelSelector")),
        str(raw.get("topologyKey") or ""),
    )


def _terms(pod: Pod, raw: Any) -> tuple[AffinityTerm, ...]:
    if not raw:
        return ()
    if not isinstance(raw, Sequence):
        raise SelectorError(f"pod affinity terms must be a list, got {raw!r}")
    return tuple(_term(pod, t) for t in raw)


def _weighted(pod: Pod, raw: Any) -> tuple[WeightedAffinityTerm, ...]:
    if not raw:
        return ()
    if not isinstance(raw, Sequence):
        raise SelectorError(f"weighted pod affinity terms must be a list, got {raw!r}")
    out = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            raise SelectorError(f"a weighted pod affinity term must be an object, got {entry!r}")
        weight = entry.get("weight") or 0
        if not isinstance(weight, int):
            raise SelectorError(f"a pod affinity weight must be an integer, got {weight!r}")
        out.append(WeightedAffinityTerm(_term(pod, entry.get("podAffinityTerm")), weight))
    return tuple(out)


def parse_pod_affinity(pod: Pod) -> PodAffinity:
    """NewPodInfo: the four groups of terms; the last group that fails to parse is reported."""
    affinity = pod.spec.get("affinity")
    if not isinstance(affinity, Mapping):
        return PodAffinity(pod)
    pod_affinity = affinity.get("podAffinity") or {}
    anti_affinity = affinity.get("podAntiAffinity") or {}
    if not isinstance(pod_affinity, Mapping) or not isinstance(anti_affinity, Mapping):
        return PodAffinity(pod, parse_error="podAffinity and podAntiAffinity must be objects")
    error: str | None = None
    groups: list[tuple[Any, ...]] = []
    for label, source, parse in (
        ("requiredAffinityTerms", pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), _terms),
        (
            "requiredAntiAffinityTerms",
            anti_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
            _terms,
        ),
        (
            "preferredAffinityTerms",
            pod_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
            _weighted,
        ),
        (
            "preferredAntiAffinityTerms",
            anti_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
            _weighted,
        ),
    ):
        try:
            groups.append(parse(pod, source))
        except SelectorError as exc:
            groups.append(())
            error = f"{label}: {exc}"
    return PodAffinity(pod, groups[0], groups[1], groups[2], groups[3], error)
