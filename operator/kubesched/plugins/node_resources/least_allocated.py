"""LeastRequestedPriority (plugin NodeResourcesLeastAllocated, cpu and memory weighted 1 each)."""

from __future__ import annotations

import numpy as np

from kubesched.model.table import IntArray
from kubesched.plugins.framework import MAX_NODE_SCORE
from kubesched.plugins.node_resources.resource_allocation import ResourceAllocationPriority


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

    def node_scores(
        self, cpu: IntArray, cpu_capacity: IntArray, memory: IntArray, memory_capacity: IntArray
    ) -> IntArray | None:
        return (
            least_requested_scores(cpu, cpu_capacity) + least_requested_scores(memory, memory_capacity)
        ) // 2


def least_requested_scores(requested: IntArray, capacity: IntArray) -> IntArray:
    """`least_requested_score` over arrays (floor division equals Go's: both sides are >= 0 where used)."""
    usable = (capacity != 0) & (requested <= capacity)
    safe = np.where(usable, capacity, 1)
    scores: IntArray = np.where(usable, (safe - requested) * MAX_NODE_SCORE // safe, 0)
    return scores
