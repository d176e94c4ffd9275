"""The audit of a finished run: every pod bound once to a real node, no node overcommitted, no
PodGroup partly bound, no pod-to-pod or node constraint broken (constraints.py).

It reads the API server's state afresh (not the watch, not the scheduler's own accounting) and
sums requests with its own quantity parser.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kubebench.constraints import check_constraints
from kubebench.gangs import pod_group_of
from kubebench.workload import parse_cpu, parse_memory

EXAMPLES = 5


@dataclass(slots=True)
class Audit:
    pods_expected: int
    pods_found: int = 0
    bound: int = 0
    unbound: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    on_unknown_node: list[str] = field(default_factory=list)
    rebound: list[str] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)
    selector_violations: list[str] = field(default_factory=list)
    selectors_checked: bool = True
    partial_groups: list[str] = field(default_factory=list)
    quota_violations: list[str] = field(default_factory=list)  # quotas.over_max
    groups_not_found: list[str] = field(default_factory=list)
    groups_checked: int = 0
    quotas_checked: int = 0
    anti_affinity_violations: list[str] = field(default_factory=list)
    affinity_violations: list[str] = field(default_factory=list)
    skew_violations: list[str] = field(default_factory=list)
    node_affinity_violations: list[str] = field(default_factory=list)
    pods_with_pod_terms: int = 0
    spread_constraints_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        found = []
        for what, items in (
            ("pods not bound", self.unbound),
            ("pods missing", self.missing),
            ("pods on a node that does not exist", self.on_unknown_node),
            ("pods bound to a second node", self.rebound),
            ("nodes overcommitted", self.overcommitted),
            ("pods on a node their nodeSelector excludes", self.selector_violations),
            ("pod groups partly bound (fewer than minMember, more than 0)", self.partial_groups),
            ("pod groups named by pods but not found", self.groups_not_found),
            ("binds after which a namespace's requests passed its ElasticQuota's max", self.quota_violations),
            ("pods on a node their required node affinity excludes", self.node_affinity_violations),
            ("pods beside a pod their required anti-affinity excludes", self.anti_affinity_violations),
            ("pods where their required pod affinity does not hold", self.affinity_violations),
            ("DoNotSchedule spread constraints skewed beyond maxSkew", self.skew_violations),
        ):
            if items:
                found.append(f"{len(items)} {what} (e.g. {', '.join(items[:EXAMPLES])})")
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pods_expected": self.pods_expected,
            "pods_found": self.pods_found,
            "bound": self.bound,
            "problems": self.problems(),
            "selectors_checked": self.selectors_checked,
            "groups_checked": self.groups_checked,
            "quotas_checked": self.quotas_checked,
            "pods_with_pod_terms": self.pods_with_pod_terms,
            "spread_constraints_checked": self.spread_constraints_checked,
        }


def audit(
    pods: list[dict[str, Any]],
    all_pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    expected: set[str],
    rebound: dict[str, list[str]],
    *,
    check_selectors: bool = True,
    pod_groups: list[dict[str, Any]] | None = None,
) -> Audit:
    """Audit the run's `pods` against `nodes`; `all_pods` (every namespace) count towards node usage.

    The null binder places pods with no algorithm at all, so nodeSelectors are checked only for
    real schedulers (`check_selectors`); capacity is checked for every binder. With `pod_groups`
    (the run's PodGroups as the API server has them), each group must have 0 or at least
    minMember members bound. Required node affinity, pod affinity and anti-affinity and
    DoNotSchedule spread are checked with the nodeSelectors (not of the null binder).
    """
    result = Audit(len(expected), len(pods), selectors_checked=check_selectors)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    names = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        names.add(name)
        node_name = pod["spec"].get("nodeName")
        if not node_name:
            result.unbound.append(name)
            continue
        result.bound += 1
        node = by_name.get(node_name)
        if node is None:
            result.on_unknown_node.append(f"{name}->{node_name}")
            continue
        selector = pod["spec"].get("nodeSelector") or {}
        labels = node["metadata"].get("labels") or {}
        if check_selectors and any(labels.get(k) != v for k, v in selector.items()):
            result.selector_violations.append(f"{name}->{node_name}")
    result.missing = sorted(expected - names)
    if pod_groups is not None:
        result.partial_groups, result.groups_not_found = partial_groups(pods, pod_groups)
        result.groups_checked = len(pod_groups)
    result.rebound = sorted(f"{pod}:{'->'.join(hops)}" for pod, hops in rebound.items())
    if check_selectors:
        found = check_constraints(pods, all_pods, nodes)
        result.node_affinity_violations = found.node_affinity
        result.anti_affinity_violations = found.anti_affinity
        result.affinity_violations = found.affinity
        result.skew_violations = found.skew
        result.pods_with_pod_terms = found.pods_with_terms
        result.spread_constraints_checked = found.spread_groups

    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for pod in all_pods:
        node_name = pod["spec"].get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node_name or phase in ("Succeeded", "Failed"):
            continue
        cpu, memory = pod_requests(pod)
        usage = used[node_name]
        usage[0] += cpu
        usage[1] += memory
        usage[2] += 1
    for node_name, (cpu, memory, count) in sorted(used.items()):
        node = by_name.get(node_name)
        if node is None:
            continue
        allocatable = node["status"].get("allocatable") or {}
        limits = (
            parse_cpu(allocatable.get("cpu", "0")),
            parse_memory(allocatable.get("memory", "0")),
            int(allocatable.get("pods", "0")),
        )
        over = [
            f"{what} {value}>{limit}"
            for what, value, limit in zip(
                ("cpu", "memory", "pods"), (cpu, memory, count), limits, strict=True
            )
            if value > limit
        ]
        if over:
            result.overcommitted.append(f"{node_name} ({'; '.join(over)})")
    return result


def partial_groups(
    pods: list[dict[str, Any]], pod_groups: list[dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """Groups with some but fewer than minMember members bound; groups pods name that do not exist.

    Bound pods only grow in a bench run (nothing deletes, evicts or rebinds them), so a group
    partly bound at the end was never made whole: the end state is the check.
    """
    min_member = {g["metadata"]["name"]: int((g.get("spec") or {}).get("minMember") or 0) for g in pod_groups}
    members: dict[str, int] = defaultdict(int)
    bound: dict[str, int] = defaultdict(int)
    for pod in pods:
        group = pod_group_of(pod)
        if not group:
            continue
        members[group] += 1
        if pod["spec"].get("nodeName"):
            bound[group] += 1
    partial = [
        f"{group} ({bound[group]}/{count} bound, minMember {min_member[group]})"
        for group, count in sorted(members.items())
        if group in min_member and 0 < bound[group] < min_member[group]
    ]
    return partial, sorted(set(members) - set(min_member))


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """(millicores, bytes) a pod requests: its containers' sum, or an init container's if larger."""
    spec = pod["spec"]

    def total(containers: list[dict[str, Any]]) -> tuple[int, int]:
        cpu = memory = 0
        for container in containers:
            requests = (container.get("resources") or {}).get("requests") or {}
            cpu += parse_cpu(requests.get("cpu", "0"))
            memory += parse_memory(requests.get("memory", "0"))
        return cpu, memory

    cpu, memory = total(spec.get("containers") or [])
    for init in spec.get("initContainers") or []:
        init_cpu, init_memory = total([init])
        cpu, memory = max(cpu, init_cpu), max(memory, init_memory)
    return cpu, memory
