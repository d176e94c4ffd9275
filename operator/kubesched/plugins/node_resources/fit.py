"""PodFitsResources (plugin NodeResourcesFit): requested plus already requested within allocatable.

Pod.requests already holds containers summed, init containers as a maximum and the overhead
added (computePodResourceRequest). The legacy Policy has no argument for this predicate;
`ignored_resources` / `ignored_resource_groups` mirror NodeResourcesFitArgs for later use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import BoolArray, NodeTable, representable
from kubesched.plugins.framework import FITS, PluginSettings, Predicate

ERR_REASON_TOO_MANY_PODS = "Too many pods"
ERR_REASON_CPU = "Insufficient cpu"
ERR_REASON_MEMORY = "Insufficient memory"
ERR_REASON_EPHEMERAL_STORAGE = "Insufficient ephemeral-storage"


def err_reason_insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName, minus the quota-name validation."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


class PodFitsResources(Predicate):
    name = "PodFitsResources"

    def __init__(
        self,
        ignored_resources: frozenset[str] = frozenset(),
        ignored_resource_groups: frozenset[str] = frozenset(),
    ) -> None:
        self.ignored_resources = ignored_resources
        self.ignored_resource_groups = ignored_resource_groups

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> PodFitsResources:
        return cls(settings.ignored_resources)

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        # Scalars checked in a stable order (Go iterates a map), minus the ignored extended resources.
        scalars = tuple(
            (name, amount)
            for name, amount in sorted(pod.requests.scalar.items())
            if not (
                is_extended_resource_name(name)
                and (name in self.ignored_resources or name.split("/")[0] in self.ignored_resource_groups)
            )
        )
        return scalars

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        want = pod.requests
        allocatable = node.node.allocatable
        requested = node.requested
        reasons: list[str] = []
        if len(node.pods) + 1 > allocatable.allowed_pods:
            reasons.append(ERR_REASON_TOO_MANY_PODS)
        # fitsRequest returns early for a pod requesting nothing (a zero-valued scalar still counts).
        if want.milli_cpu == 0 and want.memory == 0 and want.ephemeral_storage == 0 and not want.scalar:
            return reasons or FITS
        if allocatable.milli_cpu < want.milli_cpu + requested.milli_cpu:
            reasons.append(ERR_REASON_CPU)
        if allocatable.memory < want.memory + requested.memory:
            reasons.append(ERR_REASON_MEMORY)
        if allocatable.ephemeral_storage < want.ephemeral_storage + requested.ephemeral_storage:
            reasons.append(ERR_REASON_EPHEMERAL_STORAGE)
        for name, amount in state:
            if allocatable.scalar.get(name, 0) < amount + requested.scalar.get(name, 0):
                reasons.append(err_reason_insufficient(name))
        return reasons or FITS

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        want = pod.requests
        if state or not representable(want.milli_cpu, want.memory, want.ephemeral_storage):
            return None  # extended resources (rare) and absurd amounts: per node
        columns, usage = table.columns, table.usage
        fails: BoolArray = usage.pod_count + 1 > columns.alloc_pods
        if want.milli_cpu == 0 and want.memory == 0 and want.ephemeral_storage == 0 and not want.scalar:
            return fails
        fails |= columns.alloc_cpu < want.milli_cpu + usage.requested_cpu
        fails |= columns.alloc_memory < want.memory + usage.requested_memory
        fails |= columns.alloc_ephemeral < want.ephemeral_storage + usage.requested_ephemeral
        return fails
