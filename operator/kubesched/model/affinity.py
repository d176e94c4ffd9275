"""A pod's inter-pod affinity terms, parsed once (framework.PodInfo / NewPodInfo).

NodeInfo keeps the parsed terms of the pods it holds that have any pod (anti-)affinity, so the
affinity filter and priority never re-parse an existing pod's selectors. A term whose selector
does not parse makes the whole group empty and sets `parse_error`, as NewPodInfo does.

Newer fields, with kube-scheduler 1.32's meaning (types.go newAffinityTerm, AffinityTerm.Matches):
- `namespaceSelector` joins `namespaces`: a term applies to the pods of the listed namespaces and
  of those whose labels the selector matches; `{}` matches every namespace; with neither, the
  owning pod's own namespace.
- `matchLabelKeys` / `mismatchLabelKeys` (KEP-3633) add `key in (v)` / `key notin (v)`, v being the
  owning pod's value of each key (keys it lacks are skipped; a null labelSelector stays null). The
  API server merges them into labelSelector when it creates the pod (1.29+, on by default from
  1.31) and kube-scheduler reads the merged selector only. We merge here too, unless the selector
  already holds the merged requirement, so a pod that never went through such an API server (a
  manifest given to `simulate`, a hand-written snapshot) is read as the API server would have
  stored it, while a merged pod is used as stored. A merged `key in (...)` is recognised by its
  key alone (validation keeps matchLabelKeys out of the selector a user writes), so it holds even
  after the pod's labels changed; a term with only mismatchLabelKeys by `key notin (its value)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.model.objects import Pod
from kubesched.model.selectors import IN, NOT_IN, NOTHING, LabelSelector, SelectorError


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One PodAffinityTerm: the namespaces and selector a pod must match, and the topology key."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    # NOTHING when the term has no namespaceSelector (the 1.20 shape), EVERYTHING for `{}`.
    namespace_selector: LabelSelector = NOTHING

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None = None) -> bool:
        """AffinityTerm.Matches: `namespace_labels` are the labels of `pod`'s namespace."""
        return self.matches_labels(pod.namespace, pod.labels, namespace_labels)

    def matches_labels(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None = None
    ) -> bool:
        """`matches` for a pod of `namespace` (labelled `namespace_labels`) carrying `labels`."""
        if namespace in self.namespaces or (
            not self.namespace_selector.nothing and self.namespace_selector.matches(namespace_labels or {})
        ):
            return self.selector.matches(labels)
        return False

    def with_namespaces(self, namespaces: Mapping[str, Mapping[str, Any]]) -> AffinityTerm:
        """mergeAffinityTermNamespacesIfNotEmpty: the namespaces the selector picks among `namespaces`
        (Namespace objects by name) join the listed ones; `{}` is kept, as it matches any namespace."""
        if self.namespace_selector.nothing or self.namespace_selector.empty:
            return self
        picked = {
            name for name, ns in namespaces.items() if self.namespace_selector.matches(object_labels(ns))
        }
        return AffinityTerm(self.namespaces | picked, self.selector, self.topology_key)


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
    # Some term's namespaceSelector picks namespaces by label: what with_namespaces resolves.
    selects_namespaces: bool = False

    def with_namespaces(self, namespaces: Mapping[str, Mapping[str, Any]]) -> PodAffinity:
        """The incoming pod's terms with their namespaceSelectors resolved against `namespaces`, as
        PreFilter and PreScore do; itself when no term has a namespaceSelector to resolve."""
        if not self.selects_namespaces:
            return self

        def plain(group: tuple[AffinityTerm, ...]) -> tuple[AffinityTerm, ...]:
            return tuple(t.with_namespaces(namespaces) for t in group)

        def weighted(group: tuple[WeightedAffinityTerm, ...]) -> tuple[WeightedAffinityTerm, ...]:
            return tuple(WeightedAffinityTerm(w.term.with_namespaces(namespaces), w.weight) for w in group)

        return PodAffinity(
            self.pod,
            plain(self.required_affinity),
            plain(self.required_anti_affinity),
            weighted(self.preferred_affinity),
            weighted(self.preferred_anti_affinity),
            self.parse_error,
        )


def object_labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """An API object's metadata.labels, {} when it has none (or is None)."""
    labels = ((obj or {}).get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def namespace_labels(namespaces: Mapping[str, Mapping[str, Any]], name: str) -> Mapping[str, str]:
    """GetNamespaceLabelsSnapshot: the labels of namespace `name`, {} when it is not known."""
    return object_labels(namespaces.get(name))


def has_pod_affinity(pod: Pod) -> bool:
    """podWithAffinity: any podAffinity or podAntiAffinity, even an empty one."""
    affinity = pod.spec.get("affinity")
    return isinstance(affinity, Mapping) and (
        affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None
    )


def _label_keys(raw: Mapping[str, Any], field: str) -> list[str]:
    keys = raw.get(field) or []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise SelectorError(f"{field} must be a list of label keys, got {keys!r}")
    return keys


def _with_label_keys(pod: Pod, raw: Mapping[str, Any]) -> Any:
    """The term's labelSelector with matchLabelKeys / mismatchLabelKeys merged in, as the API
    server's applyMatchLabelKeysAndMismatchLabelKeys (pkg/registry/core/pod/strategy.go) does."""
    selector = raw.get("labelSelector")
    match_keys = _label_keys(raw, "matchLabelKeys")
    mismatch_keys = _label_keys(raw, "mismatchLabelKeys")
    if (not match_keys and not mismatch_keys) or not isinstance(selector, Mapping):
        return selector  # a null selector matches nothing and stays null
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return selector  # LabelSelector.parse reports it
    # Already merged by the API server: validation forbids a matchLabelKeys key in the selector a
    # user writes, and the server appends every requirement of a term at once.
    for expr in expressions:
        if isinstance(expr, Mapping) and (
            (expr.get("operator") == IN and expr.get("key") in match_keys)
            or (
                expr.get("operator") == NOT_IN
                and expr.get("key") in mismatch_keys
                and expr.get("values") == [pod.labels.get(str(expr.get("key")))]
            )
        ):
            return selector
    added = [
        {"key": key, "operator": operator, "values": [pod.labels[key]]}
        for keys, operator in ((match_keys, IN), (mismatch_keys, NOT_IN))
        for key in keys
        if key in pod.labels
    ]
    return {**selector, "matchExpressions": [*expressions, *added]} if added else selector


def _term(pod: Pod, raw: Any) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"a pod affinity term must be an object, got {raw!r}")
    raw_namespace_selector = raw.get("namespaceSelector")
    # getNamespacesFromPodAffinityTerm: the pod's own namespace only when neither field is set.
    namespaces = raw.get("namespaces") or ([] if raw_namespace_selector is not None else [pod.namespace])
    return AffinityTerm(
        frozenset(str(n) for n in namespaces),
        LabelSelector.parse(_with_label_keys(pod, raw)),
        str(raw.get("topologyKey") or ""),
        LabelSelector.parse(raw_namespace_selector),
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
    terms = [
        *groups[0],
        *groups[1],
        *(w.term for w in groups[2]),
        *(w.term for w in groups[3]),
    ]
    selects = any(not (t.namespace_selector.nothing or t.namespace_selector.empty) for t in terms)
    return PodAffinity(pod, groups[0], groups[1], groups[2], groups[3], error, selects)
