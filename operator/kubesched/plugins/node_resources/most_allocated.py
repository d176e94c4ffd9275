"""MostRequestedPriority (plugin NodeResourcesMostAllocated, cpu and memory weighted 1 each):
favours nodes whose non-zero requests, the pod's included, use most of their allocatable."""

from __future__ import annotations

from kubesched.plugins.framework import MAX_NODE_SCORE
from kubesched.plugins.node_resources.resource_allocation import ResourceAllocationPriority


def most_requested_score(requested: int, capacity: int) -> int:
    """requested * 100 / capacity in integer arithmetic; 0 when over capacity or unknown."""
    if capacity == 0 or requested > capacity:
        return 0
    return requested * MAX_NODE_SCORE // capacity


class MostRequestedPriority(ResourceAllocationPriority):
    name = "MostRequestedPriority"

    def node_score(self, cpu: int, cpu_capacity: int, memory: int, memory_capacity: int) -> int:
        return (most_requested_score(cpu, cpu_capacity) + most_requested_score(memory, memory_capacity)) // 2
