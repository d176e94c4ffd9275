"""What LeastRequestedPriority and BalancedResourceAllocation share (noderesources resourceAllocationScorer):
the node's allocatable cpu and memory against its non-zero requests plus the pod's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.algorithm.framework import Priority
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quantity import milli_value, parse_quantity, value
from kubesched.model.resources import CPU


def scoring_request(pod: Pod) -> tuple[int, int]:
    """calculatePodResourceRequest for cpu (millicores) and memory (bytes), default requests for unset ones.

    1.20 adds the pod overhead's cpu with Quantity.Value(), i.e. in whole cores rounded up, not in
    millicores: a 250m overhead adds 1. Mirrored so scores match kube-scheduler's.
    """
    milli_cpu = pod.non_zero_milli_cpu
    overhead = pod.spec.get("overhead") or {}
    if CPU in overhead:
        quantity = parse_quantity(overhead[CPU])
        milli_cpu += value(quantity) - milli_value(quantity)
    return milli_cpu, pod.non_zero_memory


class ResourceAllocationPriority(Priority):
    """Scores with `node_score(requested_cpu, allocatable_cpu, requested_memory, allocatable_memory)`."""

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        return scoring_request(pod)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        cpu, memory = state
        allocatable = node.node.allocatable
        return self.node_score(
            node.non_zero_milli_cpu + cpu,
            allocatable.milli_cpu,
            node.non_zero_memory + memory,
            allocatable.memory,
        )

    def node_score(self, cpu: int, cpu_capacity: int, memory: int, memory_capacity: int) -> int:
        raise NotImplementedError
