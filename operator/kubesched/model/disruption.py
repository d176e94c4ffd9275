"""PodDisruptionBudgets as preemption reads them (policy/v1, or policy/v1beta1 on 1.20)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.model.objects import Pod
from kubesched.model.selectors import NOTHING, LabelSelector, SelectorError


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """What preemption reads of a PodDisruptionBudget: whom it covers, and how many may go now."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()

    def matches(self, pod: Pod) -> bool:
        # A PDB with a nil or empty selector matches nothing.
        return (
            pod.namespace == self.namespace and not self.selector.empty and self.selector.matches(pod.labels)
        )


def budget_from_dict(obj: Mapping[str, Any]) -> DisruptionBudget:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        selector = LabelSelector.parse(spec.get("selector"))
    except SelectorError:
        selector = NOTHING  # 1.20 skips a PDB whose selector does not parse
    allowed = status.get("disruptionsAllowed", status.get("podDisruptionsAllowed", 0))
    try:
        disruptions_allowed = int(allowed or 0)
    except (TypeError, ValueError):
        disruptions_allowed = 0
    return DisruptionBudget(
        meta.get("namespace") or "",
        meta.get("name") or "",
        selector,
        disruptions_allowed,
        frozenset(status.get("disruptedPods") or {}),
    )
