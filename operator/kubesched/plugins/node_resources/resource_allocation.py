"""What LeastRequestedPriority and BalancedResourceAllocation share (noderesources resourceAllocationScorer):
the node's allocatable cpu and memory against its non-zero requests plus the pod's; and what the
scorers over a weighted `resources` list share: that list's parsing and each resource's request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quantity import milli_value, parse_quantity, value
from kubesched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource_name
from kubesched.model.shape import integer, known_fields, mapping, string
from kubesched.model.table import IntArray, NodeTable, representable
from kubesched.plugins.arguments import ArgumentError
from kubesched.plugins.framework import Priority

# A `resources` argument left out: cpu and memory weighing 1 each.
DEFAULT_RESOURCES: Final = ((CPU, 1), (MEMORY, 1))


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

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        cpu, memory = scoring_request(pod)
        if not representable(cpu, memory):
            return None
        columns, usage = table.columns, table.usage
        return self.node_scores(
            usage.non_zero_cpu[rows] + cpu,
            columns.alloc_cpu[rows],
            usage.non_zero_memory[rows] + memory,
            columns.alloc_memory[rows],
        )

    def node_scores(
        self, cpu: IntArray, cpu_capacity: IntArray, memory: IntArray, memory_capacity: IntArray
    ) -> IntArray | None:
        """`node_score` over arrays; None where a subclass has no vectorised form."""
        return None


def pod_resource_request(pod: Pod, resource: str) -> int:
    """calculatePodResourceRequest for any resource: containers summed (unset cpu and memory at
    their defaults), init containers as a maximum, sidecars counted as model.objects.pod_requests
    counts them, overhead added with Quantity.Value()."""
    if resource in (CPU, MEMORY):
        cpu, memory = scoring_request(pod)
        return cpu if resource == CPU else memory
    # Ephemeral storage and scalar amounts are whole units (Quantity.Value()) in pod.requests too.
    if resource == EPHEMERAL_STORAGE:
        return pod.requests.ephemeral_storage
    if is_scalar_resource_name(resource):
        return pod.requests.scalar.get(resource, 0)
    return 0


def allocatable_and_requested(node: NodeInfo, resource: str, pod_request: int) -> tuple[int, int]:
    """calculateResourceAllocatableRequest: the node's allocatable and its requests plus the pod's
    (non-zero requests for cpu and memory); (0, 0) for a resource scoring does not know."""
    allocatable = node.node.allocatable
    if resource == CPU:
        return allocatable.milli_cpu, node.non_zero_milli_cpu + pod_request
    if resource == MEMORY:
        return allocatable.memory, node.non_zero_memory + pod_request
    if resource == EPHEMERAL_STORAGE:
        return allocatable.ephemeral_storage, node.requested.ephemeral_storage + pod_request
    if is_scalar_resource_name(resource):
        return allocatable.scalar.get(resource, 0), node.requested.scalar.get(resource, 0) + pod_request
    return 0, 0


def parse_resources(
    raw: Any, *, empty_is_default: bool, default_weight: int | None, max_weight: int | None, unique: bool
) -> tuple[tuple[str, int], ...]:
    """A `resources` argument (a list of `{name, weight}`) as (name, weight) pairs; DEFAULT_RESOURCES
    when it is absent. Raises ArgumentError.

    Versions validate it differently, each caller says how: whether an empty list counts as absent
    (`empty_is_default`), the weight of an entry without one (`default_weight`; None: required),
    the largest weight (`max_weight`; None: no bound, only at least 1), and whether a resource
    named twice is refused (`unique`) rather than taking the last weight.
    """
    if raw is None or (empty_is_default and raw == []):
        return DEFAULT_RESOURCES
    if not isinstance(raw, list) or not (raw or empty_is_default):
        expected = "a list" if empty_is_default else "a non-empty list"
        raise ArgumentError("resources", f"must be {expected}, got {raw!r}")
    found: dict[str, int] = {}
    for i, entry in enumerate(raw):
        entry = mapping(entry, f"resources[{i}]")
        known_fields(entry, ("name", "weight"), f"resources[{i}]")
        name = string(entry.get("name"), f"resources[{i}].name")
        weight = integer(entry.get("weight", default_weight), f"resources[{i}].weight")
        if max_weight is None and weight < 1:
            raise ArgumentError(
                f"resources[{i}].weight", f"resource {name} weight {weight} must not be less than 1"
            )
        if max_weight is not None and not 1 <= weight <= max_weight:
            raise ArgumentError(f"resources[{i}].weight", f"must be in [1, {max_weight}], got {weight}")
        if unique and name in found:
            raise ArgumentError(f"resources[{i}].name", f"duplicate resource {name!r}")
        found[name] = weight
    return tuple(found.items())
