"""ResourceLimitsPriority: a node that could hold the pod's cpu limit or its memory limit within its
allocatable scores 1 (of 100), others 0; a tie-breaker for otherwise equal nodes.

kube-scheduler 1.20 refuses this name ("Priority type not found"): it was the NodeResourceLimits
plugin behind the alpha ResourceLimitsPriorityFunction gate until 1.19. Kept with that plugin's
semantics: limits of the containers summed, an init container's larger limit taking over, no
overhead, no normalisation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quantity import QuantityError, milli_value, parse_quantity, value
from kubesched.plugins.framework import Priority


def _limits(container: Any) -> tuple[int, int]:
    limits = ((container or {}).get("resources") or {}).get("limits") or {}
    try:
        cpu = milli_value(parse_quantity(limits["cpu"])) if "cpu" in limits else 0
        memory = value(parse_quantity(limits["memory"])) if "memory" in limits else 0
    except QuantityError:
        return 0, 0  # the API server validates limits; a malformed one counts as none
    return cpu, memory


def pod_limits(spec: Mapping[str, Any]) -> tuple[int, int]:
    """getResourceLimits: (millicores, bytes)."""
    cpu = memory = 0
    for container in spec.get("containers") or ():
        c, m = _limits(container)
        cpu, memory = cpu + c, memory + m
    for container in spec.get("initContainers") or ():
        c, m = _limits(container)
        cpu, memory = max(cpu, c), max(memory, m)
    return cpu, memory


def fits_limit(limit: int, allocatable: int) -> bool:
    """computeScore == 1."""
    return limit != 0 and allocatable != 0 and limit <= allocatable


class ResourceLimitsPriority(Priority):
    name = "ResourceLimitsPriority"
    plugin = "NodeResourceLimits"

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        return pod_limits(pod.spec)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        cpu, memory = state
        allocatable = node.node.allocatable
        return 1 if fits_limit(cpu, allocatable.milli_cpu) or fits_limit(memory, allocatable.memory) else 0
