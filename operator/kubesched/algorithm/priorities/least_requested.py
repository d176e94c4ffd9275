"""LeastRequestedPriority (plugin NodeResourcesLeastAllocated, cpu and memory weighted 1 each)."""

from __future__ import annotations

from kubesched.algorithm.framework import MAX_NODE_SCORE
from kubesched.algorithm.priorities.resource_allocation import ResourceAllocationPriority


def least_requested_score(requested: int, capacity: int) -> int:
    """(capacity - requested) * 100 / capacity in integer arithmetic; 0 when full or unknown."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


class LeastRequestedPriority(ResourceAllocationPriority):
    name = "LeastRequestedPriority"

    def node_score(self, cpu: int, cpu_capacity: int, memory: int, memory_capacity: int) -> int:
        # nodeScore / weightSum with both weights 1; all terms are >= 0, so // truncates like Go.
        cpu_score = least_requested_score(cpu, cpu_capacity)
        return (cpu_score + least_requested_score(memory, memory_capacity)) // 2
