"""The audit's own reading of pod-to-pod and node constraints, on a run's end state.

kube-scheduler 1.20's semantics (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go,
podtopologyspread/filtering.go, nodeaffinity/node_affinity.go), written again here, small and
slow: the harness must not trust the code it measures.

- Required pod anti-affinity: no other pod a term matches (the term's namespaces, or the pod's
  own) runs in the pod's topology domain of the term's key. Checked from every run pod with
  terms, so an earlier pod's terms bind the later ones too, as 1.20 checks existing pods' terms.
- Required pod affinity: the node has every term's key and, for each term, a pod matching all the
  terms runs in that domain; or no other pod matches them anywhere and the pod matches its own
  terms (the first pod of a series).
- DoNotSchedule spread: among the nodes a pod may use (its nodeSelector and required node
  affinity, every DoNotSchedule key present), the matching pods of its namespace per domain
  differ by at most maxSkew. Bound pods only grow in a run and each placement keeps
  max - min <= maxSkew, so the end state must too, for pods sharing a constraint.
- Required node affinity: one of the nodeSelectorTerms has all its expressions true.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TERMINAL_PHASES = ("Succeeded", "Failed")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(slots=True)
class ConstraintAudit:
    """Violations found, each a short line naming the pod (or constraint) and what is wrong."""

    anti_affinity: list[str] = field(default_factory=list)
    affinity: list[str] = field(default_factory=list)
    skew: list[str] = field(default_factory=list)
    node_affinity: list[str] = field(default_factory=list)
    pods_with_terms: int = 0
    spread_groups: int = 0


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: a missing selector matches nothing, an empty one everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def node_requirement_holds(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) on a node's labels."""
    key, operator = requirement["key"], requirement["operator"]
    values = requirement.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if operator == "Gt" else have < want
    return False


def node_affinity_holds(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod's required node affinity holds on the node: one of its terms matches whole."""
    required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    if not required:
        return True
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    for term in required.get("nodeSelectorTerms") or []:
        expressions = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not expressions and not fields:
            continue  # an empty term matches nothing
        if all(node_requirement_holds(e, labels) for e in expressions) and all(
            node_requirement_holds(f, {"metadata.name": name}) for f in fields
        ):
            return True
    return False


def node_fits_pod(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod's nodeSelector and required node affinity both hold on the node."""
    labels = node["metadata"].get("labels") or {}
    selector = pod["spec"].get("nodeSelector") or {}
    return all(labels.get(k) == v for k, v in selector.items()) and node_affinity_holds(pod, node)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _Placements:
    """The bound pods, grouped by namespace and label set, so that a selector meets each distinct
    label set once."""

    def __init__(
        self, pods: Iterable[Mapping[str, Any]], node_labels: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.node_labels = node_labels
        self.groups: dict[tuple[str, frozenset[tuple[str, str]]], Counter[str]] = defaultdict(Counter)
        for pod in pods:
            node = pod["spec"].get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            if not node or node not in node_labels or phase in TERMINAL_PHASES:
                continue
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            labels = frozenset((meta.get("labels") or {}).items())
            self.groups[(meta.get("namespace", "default"), labels)][node] += 1
        self._cache: dict[str, Counter[str]] = {}

    def nodes_of(self, terms: Sequence[tuple[frozenset[str], Mapping[str, Any] | None]]) -> Counter[str]:
        """Pods per node that every (namespaces, selector) of `terms` matches."""
        key = _key([[sorted(ns), sel] for ns, sel in terms])
        found = self._cache.get(key)
        if found is None:
            found = Counter()
            for (namespace, labels), nodes in self.groups.items():
                as_dict = dict(labels)
                if all(namespace in ns and selector_matches(sel, as_dict) for ns, sel in terms):
                    found.update(nodes)
            self._cache[key] = found
        return found

    def in_domain(self, nodes: Counter[str], topology_key: str, value: str) -> int:
        return sum(n for node, n in nodes.items() if self.node_labels[node].get(topology_key) == value)


def _terms(pod: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return list((((pod["spec"].get("affinity") or {}).get(kind) or {}).get(REQUIRED)) or [])


def _namespaces(pod: Mapping[str, Any], term: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(term.get("namespaces") or [pod["metadata"].get("namespace", "default")])


def check_constraints(
    pods: Sequence[Mapping[str, Any]],
    all_pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
) -> ConstraintAudit:
    """Audit the bound run `pods` against every bound pod (`all_pods`, every namespace) on `nodes`."""
    result = ConstraintAudit()
    by_name = {n["metadata"]["name"]: n for n in nodes}
    node_labels = {name: n["metadata"].get("labels") or {} for name, n in by_name.items()}
    placed = _Placements(all_pods, node_labels)
    # One check per distinct constraint and set of nodes the pods may use.
    spread: dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
    for pod in pods:
        node_name = pod["spec"].get("nodeName")
        if not node_name or node_name not in by_name:
            continue
        name = pod["metadata"]["name"]
        labels = node_labels[node_name]
        if not node_affinity_holds(pod, by_name[node_name]):
            result.node_affinity.append(f"{name}->{node_name}")
        anti, near = _terms(pod, "podAntiAffinity"), _terms(pod, "podAffinity")
        if anti or near:
            result.pods_with_terms += 1
        for term in anti:
            value = labels.get(term.get("topologyKey", ""))
            if value is None:
                continue
            matching = placed.nodes_of([(_namespaces(pod, term), term.get("labelSelector"))])
            count = placed.in_domain(matching, term["topologyKey"], value)
            if _matches(pod, [term]):
                count -= 1  # itself
            if count > 0:
                result.anti_affinity.append(
                    f"{name}->{node_name}: {count} pod(s) its anti-affinity term matches "
                    f"in {term['topologyKey']}={value}"
                )
        if near:
            problem = _affinity_problem(pod, near, placed, labels)
            if problem:
                result.affinity.append(f"{name}->{node_name}: {problem}")
        for constraint in pod["spec"].get("topologySpreadConstraints") or []:
            if constraint.get("whenUnsatisfiable") != "DoNotSchedule":
                continue
            group = _key([pod["metadata"].get("namespace", "default"), constraint, _eligibility(pod)])
            spread.setdefault(group, (pod, constraint))
    result.spread_groups = len(spread)
    eligible: dict[str, set[str]] = {}
    for pod, constraint in spread.values():
        key = _key(_eligibility(pod))
        if key not in eligible:
            keys = _hard_keys(pod)
            eligible[key] = {
                name
                for name, node in by_name.items()
                if keys <= set(node_labels[name]) and node_fits_pod(pod, node)
            }
        problem = _skew_problem(pod, constraint, placed, eligible[key])
        if problem:
            result.skew.append(problem)
    return result


def _matches(pod: Mapping[str, Any], terms: Sequence[Mapping[str, Any]]) -> bool:
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    namespace = meta.get("namespace", "default")
    return all(
        namespace in _namespaces(pod, t) and selector_matches(t.get("labelSelector"), labels) for t in terms
    )


def _affinity_problem(
    pod: Mapping[str, Any],
    terms: Sequence[Mapping[str, Any]],
    placed: _Placements,
    labels: Mapping[str, str],
) -> str:
    """Why the pod's required affinity does not hold where it runs ("" when it does)."""
    keys = [t.get("topologyKey", "") for t in terms]
    missing = [k for k in keys if k not in labels]
    if missing:
        return f"its node has no {', '.join(missing)} label"
    # As 1.20 counts them: pods that match all the terms, then per term's domain.
    matching = placed.nodes_of([(_namespaces(pod, t), t.get("labelSelector")) for t in terms])
    itself = 1 if _matches(pod, terms) else 0
    anywhere = sum(matching.values()) - itself
    short = [f"{k}={labels[k]}" for k in keys if placed.in_domain(matching, k, labels[k]) - itself <= 0]
    if not short:
        return ""
    if anywhere <= 0 and itself:
        return ""  # the first pod of its series: nothing else matches anywhere
    return f"no pod its affinity terms match in {', '.join(short)} ({anywhere} elsewhere)"


def _hard_keys(pod: Mapping[str, Any]) -> set[str]:
    return {
        c["topologyKey"]
        for c in pod["spec"].get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable") == "DoNotSchedule"
    }


def _eligibility(pod: Mapping[str, Any]) -> list[Any]:
    """What decides the nodes a pod's spread constraints count on."""
    required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    return [pod["spec"].get("nodeSelector"), required, sorted(_hard_keys(pod))]


def _skew_problem(
    pod: Mapping[str, Any], constraint: Mapping[str, Any], placed: _Placements, eligible: set[str]
) -> str:
    """The constraint's skew over the domains of the `eligible` nodes, if above its maxSkew."""
    key, max_skew = constraint["topologyKey"], int(constraint["maxSkew"])
    namespace = pod["metadata"].get("namespace", "default")
    matching = placed.nodes_of([(frozenset([namespace]), constraint.get("labelSelector"))])
    counts: Counter[str] = Counter({placed.node_labels[n][key]: 0 for n in eligible})
    for node, n in matching.items():
        if node in eligible:
            counts[placed.node_labels[node][key]] += n
    if not counts:
        return ""
    skew = max(counts.values()) - min(counts.values())
    if skew <= max_skew:
        return ""
    selector = _key(constraint.get("labelSelector"))
    shown = ", ".join(f"{d} {c}" for d, c in sorted(counts.items()))
    return f"{namespace} {selector} by {key}: {shown} (skew {skew} > maxSkew {max_skew})"
