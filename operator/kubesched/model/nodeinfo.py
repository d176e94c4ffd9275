"""A node with the pods placed on it and what they request: the unit the algorithm works on.

NodeInfo and Snapshot are immutable. The cache replaces a node's NodeInfo on every change
rather than mutating it, so a snapshot handed to the executor can never change under the
algorithm while watch events keep arriving on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubesched.model.objects import HostPort, Node, Pod
from kubesched.model.resources import ZERO, Resource


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node: Node
    pods: Mapping[str, Pod] = field(default_factory=dict)  # by uid
    requested: Resource = ZERO
    non_zero_milli_cpu: int = 0
    non_zero_memory: int = 0
    used_ports: tuple[HostPort, ...] = ()

    @property
    def name(self) -> str:
        return self.node.name

    def with_pod(self, pod: Pod) -> NodeInfo:
        """This node with `pod` added (replacing an older version of the same pod)."""
        base = self.without_pod(pod.uid) if pod.uid in self.pods else self
        pods = dict(base.pods)
        pods[pod.uid] = pod
        return NodeInfo(
            base.node,
            pods,
            base.requested + pod.requests,
            base.non_zero_milli_cpu + pod.non_zero_milli_cpu,
            base.non_zero_memory + pod.non_zero_memory,
            base.used_ports + pod.host_ports,
        )

    def without_pod(self, uid: str) -> NodeInfo:
        pod = self.pods.get(uid)
        if pod is None:
            return self
        pods = {k: v for k, v in self.pods.items() if k != uid}
        ports = list(self.used_ports)
        for port in pod.host_ports:
            ports.remove(port)
        return NodeInfo(
            self.node,
            pods,
            self.requested - pod.requests,
            self.non_zero_milli_cpu - pod.non_zero_milli_cpu,
            self.non_zero_memory - pod.non_zero_memory,
            tuple(ports),
        )

    def with_node(self, node: Node) -> NodeInfo:
        return replace(self, node=node)


@dataclass(frozen=True, slots=True)
class ClusterObjects:
    """Objects other than nodes and pods that some plugins read, as raw dicts keyed `ns/name` (or `name`)."""

    services: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    replication_controllers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    replica_sets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    stateful_sets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    persistent_volumes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    persistent_volume_claims: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    storage_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster as one scheduling cycle sees it."""

    nodes: Sequence[NodeInfo]
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    index: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Sequence[NodeInfo], objects: ClusterObjects | None = None) -> Snapshot:
        return cls(tuple(nodes), objects or ClusterObjects(), {n.name: i for i, n in enumerate(nodes)})

    def get(self, name: str) -> NodeInfo | None:
        i = self.index.get(name)
        return None if i is None else self.nodes[i]

    def with_pod_on(self, pod: Pod, node_name: str) -> Snapshot:
        """The snapshot after placing `pod` on `node_name`, so the next pod of a batch sees it."""
        i = self.index[node_name]
        nodes = list(self.nodes)
        nodes[i] = nodes[i].with_pod(pod)
        return Snapshot(tuple(nodes), self.objects, self.index)
