"""BalancedResourceAllocation (plugin NodeResourcesBalancedAllocation, BalanceAttachedNodeVolumes off):
favours nodes whose cpu and memory fractions would be close after placing the pod."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubesched.model.table import IntArray
from kubesched.plugins.framework import MAX_NODE_SCORE
from kubesched.plugins.node_resources.resource_allocation import ResourceAllocationPriority


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

    def node_scores(
        self, cpu: IntArray, cpu_capacity: IntArray, memory: IntArray, memory_capacity: IntArray
    ) -> IntArray | None:
        cpu_fraction = fractions_of_capacity(cpu, cpu_capacity)
        memory_fraction = fractions_of_capacity(memory, memory_capacity)
        full = (cpu_fraction >= 1) | (memory_fraction >= 1)
        # The same float64 operations as node_score, truncated as int() does (the value is >= 0).
        scores = ((1 - np.abs(cpu_fraction - memory_fraction)) * float(MAX_NODE_SCORE)).astype(np.int64)
        result: IntArray = np.where(full, 0, scores)
        return result


def fractions_of_capacity(requested: IntArray, capacity: IntArray) -> npt.NDArray[np.float64]:
    safe = np.where(capacity == 0, 1, capacity)
    fractions: npt.NDArray[np.float64] = np.where(
        capacity == 0, 1.0, requested.astype(np.float64) / safe.astype(np.float64)
    )
    return fractions
