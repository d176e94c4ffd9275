"""NodeResourcesFit's score as kube-scheduler 1.32 computes it (noderesources/fit.go,
resource_allocation.go, least_allocated.go, most_allocated.go, requested_to_capacity_ratio.go):
a `scoringStrategy` of type LeastAllocated, MostAllocated or RequestedToCapacityRatio over a list of
weighted resources, extended resources such as `nvidia.com/gpu` included.

A SchedulerPolicy asks for it with `nodeResourcesScoring`; the legacy priorities
(LeastRequestedPriority, MostRequestedPriority, RequestedToCapacityRatioPriority) keep 1.20's
formulas. Where 1.32 differs from them, this follows 1.32:

- every resource has its own weight (1..100); absent `resources` means cpu and memory weighing 1;
- a resource the node does not offer, or an extended resource the pod does not request, is left
  out of the weighted average (1.20 scored it as full, or as 0);
- MostAllocated counts a node whose requests exceed its allocatable as full (100), not as 0;
- RequestedToCapacityRatio takes utilization as `requested * 100 / capacity`;
- the pod's cpu overhead is counted in millicores (1.20 rounded it up to whole cores).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.resources import CPU, MEMORY, is_scalar_resource_name
from kubesched.model.shape import known_fields
from kubesched.plugins.arguments import ArgumentError
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority
from kubesched.plugins.node_resources.least_allocated import least_requested_score
from kubesched.plugins.node_resources.requested_to_capacity_ratio import (
    MAX_UTILIZATION,
    broken_linear,
    parse_shape,
)
from kubesched.plugins.node_resources.resource_allocation import (
    DEFAULT_RESOURCES,
    allocatable_and_requested,
    parse_resources,
    pod_resource_request,
)

Strategy = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
STRATEGIES: Final[tuple[Strategy, ...]] = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
# ValidateNodeResourcesFitArgs: a resource weight is in [1, MaxNodeScore].
MAX_RESOURCE_WEIGHT: Final = MAX_NODE_SCORE
FIELDS: Final = ("type", "resources", "shape")


def most_requested_score(requested: int, capacity: int) -> int:
    """1.32's mostRequestedScore: requests beyond capacity (non-zero defaults) count as full."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def pod_request(pod: Pod, resource: str) -> int:
    """calculatePodResourceRequest: non-zero defaults for unset cpu and memory, overhead included
    once (cpu in millicores), as the pod's non-zero requests already count it."""
    if resource == CPU:
        return pod.non_zero_milli_cpu
    if resource == MEMORY:
        return pod.non_zero_memory
    return pod_resource_request(pod, resource)


class NodeResourcesFitScore(Priority):
    """1.32's NodeResourcesFit score plugin with one scoring strategy."""

    name = "NodeResourcesFit"

    def __init__(
        self,
        strategy: Strategy,
        resources: Sequence[tuple[str, int]] = DEFAULT_RESOURCES,
        shape: Sequence[tuple[int, int]] = (),
    ) -> None:
        self.strategy = strategy
        self.resources = tuple(resources)
        self.shape = tuple(shape)

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> NodeResourcesFitScore:
        """From a policy's `nodeResourcesScoring` without its `weight`; raises ArgumentError."""
        known_fields(argument, FIELDS)
        strategy = argument.get("type")
        if strategy not in STRATEGIES:
            raise ArgumentError("type", f"must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        # 1.32's validateResources: a non-empty list, each weight given, in range and once.
        resources = parse_resources(
            argument.get("resources"),
            empty_is_default=False,
            default_weight=None,
            max_weight=MAX_RESOURCE_WEIGHT,
            unique=True,
        )
        raw_shape = argument.get("shape")
        if strategy != REQUESTED_TO_CAPACITY_RATIO:
            if raw_shape is not None:
                raise ArgumentError("shape", f"is for {REQUESTED_TO_CAPACITY_RATIO} only, not {strategy}")
            return cls(strategy, resources)
        return cls(strategy, resources, parse_shape(raw_shape))

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        return tuple(pod_request(pod, name) for name, _ in self.resources)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        total = weights = 0
        for (resource, weight), requested_by_pod in zip(self.resources, state, strict=True):
            # An extended resource the pod does not ask for is not scored (resource_allocation.go).
            if requested_by_pod == 0 and is_scalar_resource_name(resource):
                continue
            capacity, requested = allocatable_and_requested(node, resource, requested_by_pod)
            if capacity == 0:
                continue
            score = self._resource_score(requested, capacity)
            if self.strategy == REQUESTED_TO_CAPACITY_RATIO and score == 0:
                continue  # buildRequestedToCapacityRatioScorerFunction leaves zero scores out
            total += score * weight
            weights += weight
        if weights == 0:
            return 0
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # math.Round: halves away from zero (the operands are never negative here).
            return math.floor(total / weights + 0.5)
        return total // weights

    def _resource_score(self, requested: int, capacity: int) -> int:
        if self.strategy == LEAST_ALLOCATED:
            return least_requested_score(requested, capacity)
        if self.strategy == MOST_ALLOCATED:
            return most_requested_score(requested, capacity)
        if requested > capacity:
            return broken_linear(self.shape, MAX_UTILIZATION)
        return broken_linear(self.shape, requested * MAX_UTILIZATION // capacity)
