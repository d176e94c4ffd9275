"""NodeResources* (kube-scheduler 1.20 pkg/scheduler/framework/plugins/noderesources/), one
module per plugin as there.

Predicate PodFitsResources (NodeResourcesFit, fit.py). Priorities LeastRequestedPriority
(NodeResourcesLeastAllocated), MostRequestedPriority (NodeResourcesMostAllocated),
BalancedResourceAllocation (NodeResourcesBalancedAllocation), RequestedToCapacityRatioPriority
(custom priorities with a `requestedToCapacityRatioArguments` argument) and ResourceLimitsPriority
(NodeResourceLimits, gone in 1.20). NodeResourcesFitScore (scoring_strategy.py) is 1.32's
NodeResourcesFit score with a weighted scoring strategy, for a policy's `nodeResourcesScoring`.

Reasons: ERR_REASON_TOO_MANY_PODS, ERR_REASON_CPU, ERR_REASON_MEMORY, ERR_REASON_EPHEMERAL_STORAGE,
err_reason_insufficient(resource) for the others.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.node_resources.balanced_allocation import BalancedResourceAllocation
from kubesched.plugins.node_resources.fit import (
    ERR_REASON_CPU,
    ERR_REASON_EPHEMERAL_STORAGE,
    ERR_REASON_MEMORY,
    ERR_REASON_TOO_MANY_PODS,
    PodFitsResources,
    err_reason_insufficient,
)
from kubesched.plugins.node_resources.least_allocated import LeastRequestedPriority
from kubesched.plugins.node_resources.most_allocated import MostRequestedPriority
from kubesched.plugins.node_resources.requested_to_capacity_ratio import RequestedToCapacityRatioPriority
from kubesched.plugins.node_resources.resource_limits import ResourceLimitsPriority
from kubesched.plugins.node_resources.scoring_strategy import NodeResourcesFitScore

register(
    predicate(
        PodFitsResources,
        order=6,
        framework="NodeResourcesFit",
        summary="The pod's requests fit in the node's allocatable minus what its pods request.",
    ),
    # 1.32's NodeResourcesFit scores with the LeastAllocated strategy unless its arguments say otherwise.
    priority(
        LeastRequestedPriority,
        framework="NodeResourcesFit",
        default_weight=1,
        summary="Favours nodes with the most cpu and memory left after the pod (spreading).",
    ),
    priority(
        MostRequestedPriority,
        summary="Favours nodes with the least cpu and memory left after the pod (packing).",
    ),
    priority(
        BalancedResourceAllocation,
        framework="NodeResourcesBalancedAllocation",
        default_weight=1,
        summary="Favours nodes whose cpu and memory use would be closest to each other.",
    ),
    priority(
        RequestedToCapacityRatioPriority,
        aliases=("RequestedToCapacityRatio",),
        argument_key="requestedToCapacityRatioArguments",
        summary="Utilisation scored through a broken-line `shape`, per resource.",
    ),
    priority(
        ResourceLimitsPriority,
        summary="A tie-breaker for nodes that could hold the pod's cpu or memory limit.",
    ),
)

__all__ = [
    "ERR_REASON_CPU",
    "ERR_REASON_EPHEMERAL_STORAGE",
    "ERR_REASON_MEMORY",
    "ERR_REASON_TOO_MANY_PODS",
    "BalancedResourceAllocation",
    "LeastRequestedPriority",
    "MostRequestedPriority",
    "NodeResourcesFitScore",
    "PodFitsResources",
    "RequestedToCapacityRatioPriority",
    "ResourceLimitsPriority",
    "err_reason_insufficient",
]
