"""RequestedToCapacityRatioPriority (plugin RequestedToCapacityRatio): a custom priority with a
`requestedToCapacityRatioArguments` argument scores each resource's utilisation after placing the
pod through a broken-line function (`shape`, scores 0..10 scaled to 0..100) and averages the
resources by weight.

As in 1.20 a policy may declare it once; shape points are sorted by utilisation (0..100, strictly
increasing) and every resource weight is at least 1. Without `resources`, cpu and memory weigh 1
each, the default 1.20 documents for the plugin (its legacy Policy path passes an empty list
instead, which makes every score 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.shape import integer, known_fields, mapping
from kubesched.plugins.arguments import ArgumentError
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority
from kubesched.plugins.helper import go_div
from kubesched.plugins.node_resources.resource_allocation import (
    allocatable_and_requested,
    parse_resources,
    pod_resource_request,
)

MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """buildBrokenLinearFunction: linear between the points, flat outside them."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + go_div((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


def parse_shape(raw: Any) -> tuple[tuple[int, int], ...]:
    """A `shape` (utilization 0..100 strictly increasing, score 0..10) as points scored 0..100."""
    if not isinstance(raw, list) or not raw:
        raise ArgumentError("shape", "at least one point must be specified")
    points: list[tuple[int, int]] = []
    for i, point in enumerate(raw):
        point = mapping(point, f"shape[{i}]")
        known_fields(point, ("utilization", "score"), f"shape[{i}]")
        utilization = integer(point.get("utilization", 0), f"shape[{i}].utilization")
        score = integer(point.get("score", 0), f"shape[{i}].score")
        if not 0 <= utilization <= MAX_UTILIZATION:
            raise ArgumentError(
                f"shape[{i}].utilization", f"must be in 0..{MAX_UTILIZATION}, got {utilization}"
            )
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ArgumentError(
                f"shape[{i}].score", f"must be in 0..{MAX_CUSTOM_PRIORITY_SCORE}, got {score}"
            )
        if points and points[-1][0] >= utilization:
            raise ArgumentError(
                f"shape[{i}].utilization",
                f"utilization values must be sorted: {points[-1][0]} then {utilization}",
            )
        points.append((utilization, score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)))
    return tuple(points)


class RequestedToCapacityRatioPriority(Priority):
    name = "RequestedToCapacityRatioPriority"
    plugin = "RequestedToCapacityRatio"

    def __init__(self, shape: Sequence[tuple[int, int]], resources: Sequence[tuple[str, int]]) -> None:
        self.shape = tuple(shape)
        self.resources = tuple(resources)

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> RequestedToCapacityRatioPriority:
        known_fields(argument, ("shape", "resources"))
        # 1.20's ValidateRequestedToCapacityRatioArgs: an empty list as none, no upper bound.
        resources = parse_resources(
            argument.get("resources"), empty_is_default=True, default_weight=0, max_weight=None, unique=False
        )
        return cls(parse_shape(argument.get("shape")), resources)

    def merge(self, other: Priority) -> Priority:
        raise ArgumentError("", 'redeclares custom priority "RequestedToCapacityRatio"')

    def resource_score(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return broken_linear(self.shape, MAX_UTILIZATION)
        return broken_linear(
            self.shape, MAX_UTILIZATION - (capacity - requested) * MAX_UTILIZATION // capacity
        )

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        return tuple((name, weight, pod_resource_request(pod, name)) for name, weight in self.resources)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        total = weights = 0
        for resource, weight, pod_request in state:
            capacity, requested = allocatable_and_requested(node, resource, pod_request)
            score = self.resource_score(requested, capacity)
            if score > 0:
                total += score * weight
                weights += weight
        if weights == 0:
            return 0
        # math.Round: halves away from zero (the operands are never negative here).
        return math.floor(total / weights + 0.5)
