"""BalancedResourceAllocation (plugin NodeResourcesBalancedAllocation, BalanceAttachedNodeVolumes off):
favours nodes whose cpu and memory fractions would be close after placing the pod."""

from __future__ import annotations

from kubesched.algorithm.framework import MAX_NODE_SCORE
from kubesched.algorithm.priorities.resource_allocation import ResourceAllocationPriority


def fraction_of_capacity(requested: int, capacity: int) -> float:
    if capacity == 0:
        return 1.0
    # Each side converted to float64 first, as Go does.
    return float(requested) / float(capacity)


class BalancedResourceAllocation(ResourceAllocationPriority):
    name = "BalancedResourceAllocation"

    def node_score(self, cpu: int, cpu_capacity: int, memory: int, memory_capacity: int) -> int:
        cpu_fraction = fraction_of_capacity(cpu, cpu_capacity)
        memory_fraction = fraction_of_capacity(memory, memory_capacity)
        if cpu_fraction >= 1 or memory_fraction >= 1:
            return 0
        diff = abs(cpu_fraction - memory_fraction)
        return int((1 - diff) * float(MAX_NODE_SCORE))
