"""A node with the pods placed on it and what they request: the unit the algorithm works on.

NodeInfo and Snapshot are immutable. The cache replaces a node's NodeInfo on every change
rather than mutating it, so a snapshot handed to the executor can never change under the
algorithm while watch events keep arriving on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kubesched.model.affinity import PodAffinity, has_pod_affinity, parse_pod_affinity
from kubesched.model.objects import HostPort, Node, Pod
from kubesched.model.quota import EMPTY as EMPTY_QUOTAS
from kubesched.model.quota import QuotaState, elastic_quota_from_dict
from kubesched.model.resources import ZERO, Resource
from kubesched.model.table import NodeColumns, NodeTable, NodeUsage

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node: Node
    pods: Mapping[str, Pod] = field(default_factory=dict)  # by uid
    requested: Resource = ZERO
    non_zero_milli_cpu: int = 0
    non_zero_memory: int = 0
    used_ports: tuple[HostPort, ...] = ()
    # The pods with any pod (anti-)affinity, their terms parsed (NodeInfo.PodsWithAffinity).
    pods_with_affinity: tuple[PodAffinity, ...] = ()

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def pods_with_required_anti_affinity(self) -> tuple[PodAffinity, ...]:
        """NodeInfo.PodsWithRequiredAntiAffinity."""
        return tuple(p for p in self.pods_with_affinity if p.required_anti_affinity)

    def with_pod(self, pod: Pod, affinity: PodAffinity | None = None) -> NodeInfo:
        """This node with `pod` added (replacing an older version of the same pod); `affinity`:
        its terms when already parsed."""
        base = self.without_pod(pod.uid) if pod.uid in self.pods else self
        pods = dict(base.pods)
        pods[pod.uid] = pod
        with_affinity = base.pods_with_affinity
        if has_pod_affinity(pod):
            with_affinity = (*with_affinity, affinity or parse_pod_affinity(pod))
        return NodeInfo(
            base.node,
            pods,
            base.requested + pod.requests,
            base.non_zero_milli_cpu + pod.non_zero_milli_cpu,
            base.non_zero_memory + pod.non_zero_memory,
            base.used_ports + pod.host_ports,
            with_affinity,
        )

    def without_pod(self, uid: str) -> NodeInfo:
        pod = self.pods.get(uid)
        if pod is None:
            return self
        pods = {k: v for k, v in self.pods.items() if k != uid}
        ports = list(self.used_ports)
        for port in pod.host_ports:
            ports.remove(port)
        with_affinity = self.pods_with_affinity
        if with_affinity:
            with_affinity = tuple(p for p in with_affinity if p.pod.uid != uid)
        return NodeInfo(
            self.node,
            pods,
            self.requested - pod.requests,
            self.non_zero_milli_cpu - pod.non_zero_milli_cpu,
            self.non_zero_memory - pod.non_zero_memory,
            tuple(ports),
            with_affinity,
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
    csi_nodes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Storage capacity tracking (plugins/volume_binding): drivers by name, capacities by `ns/name`.
    csi_drivers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    csi_storage_capacities: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    namespaces: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # for namespaceSelector
    pod_groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # gangs (model/podgroup.py)
    elastic_quotas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # model/quota.py


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster as one scheduling cycle sees it.

    `node_memo` and `pod_memo` hold indexes derived lazily from the snapshot (how many nodes hold
    an image; which nodes hold pods with affinity). A snapshot of the next pod in a batch shares
    the node memo, and the pod memo too unless the placed pod has pod (anti-)affinity; then the
    pod memo's sets of nodes are derived from the previous ones with the one node changed.
    """

    nodes: Sequence[NodeInfo]
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    index: Mapping[str, int] = field(default_factory=dict)
    node_memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    pod_memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    # The vectorised view (model/table.py), built on first use; `False`: not representable.
    columns: NodeColumns | bool | None = field(default=None, compare=False, repr=False)
    usage: NodeUsage | bool | None = field(default=None, compare=False, repr=False)
    # The ElasticQuotas in force and what their pods use (model/quota.py); empty without quotas.
    quotas: QuotaState = EMPTY_QUOTAS

    @classmethod
    def of(cls, nodes: Sequence[NodeInfo], objects: ClusterObjects | None = None) -> Snapshot:
        """The snapshot of these nodes and objects, the quotas' use counted from the nodes' pods."""
        objects = objects or ClusterObjects()
        quotas = EMPTY_QUOTAS
        if objects.elastic_quotas:
            parsed = (elastic_quota_from_dict(raw) for raw in objects.elastic_quotas.values())
            quotas = QuotaState.build(parsed, (pod for n in nodes for pod in n.pods.values()))
        return cls(tuple(nodes), objects, {n.name: i for i, n in enumerate(nodes)}, quotas=quotas)

    def table(self) -> NodeTable | None:
        """The nodes as columns, or None when some amount is too large for them."""
        if self.columns is None:
            object.__setattr__(self, "columns", NodeColumns.build([n.node for n in self.nodes]) or False)
        if self.usage is None:
            object.__setattr__(self, "usage", NodeUsage.build([n.pods for n in self.nodes]) or False)
        if isinstance(self.columns, NodeColumns) and isinstance(self.usage, NodeUsage):
            return NodeTable(self.columns, self.usage)
        return None

    def get(self, name: str) -> NodeInfo | None:
        i = self.index.get(name)
        return None if i is None else self.nodes[i]

    def with_pod_on(self, pod: Pod, node_name: str) -> Snapshot:
        """The snapshot after placing `pod` on `node_name`, so the next pod of a batch sees it."""
        i = self.index[node_name]
        nodes = list(self.nodes)
        affinity = self.parsed(pod, parse_pod_affinity) if has_pod_affinity(pod) else None
        usage: NodeUsage | bool | None = None  # rebuilt if asked for
        if isinstance(self.usage, NodeUsage) and pod.uid not in nodes[i].pods:
            usage = self.usage.with_pod(i, pod, affinity) or False
        nodes[i] = nodes[i].with_pod(pod, affinity)
        pod_memo = _with_node_changed(self.pod_memo, i, nodes[i]) if affinity else self.pod_memo
        quotas = self.quotas.with_pod(pod) if pod.uid not in self.nodes[i].pods else self.quotas
        return Snapshot(
            tuple(nodes), self.objects, self.index, self.node_memo, pod_memo, self.columns, usage, quotas
        )

    def without_pods(self, pods: Sequence[Pod]) -> Snapshot:
        """The snapshot after removing `pods` from their nodes (preemption's victims, simulated)."""
        nodes = list(self.nodes)
        quotas = self.quotas
        for pod in pods:
            i = self.index.get(pod.node_name)
            if i is None or pod.uid not in nodes[i].pods:  # placed earlier in the batch: no nodeName yet
                i = next((j for j, info in enumerate(nodes) if pod.uid in info.pods), None)
            if i is not None:
                placed = nodes[i].pods[pod.uid]
                quotas = quotas.without_pod(placed)
                nodes[i] = nodes[i].without_pod(pod.uid)
        return Snapshot(
            tuple(nodes), self.objects, self.index, self.node_memo, {}, self.columns, None, quotas
        )

    def parsed(self, pod: Pod, parse: Callable[[Pod], T]) -> T:
        """parse(pod), made once for the batch: several plugins, and the placement, read the same
        parsed terms of a pod."""
        key = (parse, pod.uid)
        found = self.node_memo.get(key)
        if found is None or found[0] is not pod:
            found = self.node_memo[key] = (pod, parse(pod))
        made: T = found[1]
        return made

    def image_node_count(self, image: str) -> int:
        """ImageStateSummary.NumNodes: how many nodes report `image`."""
        key = f"image:{image}"
        count = self.node_memo.get(key)
        if count is None:
            count = sum(1 for n in self.nodes if image in n.node.images)
            self.node_memo[key] = count
        return int(count)

    def nodes_with_pod_affinity(self) -> tuple[NodeInfo, ...]:
        """HavePodsWithAffinityList: nodes holding a pod with any pod (anti-)affinity."""
        return self._nodes_where(_WITH_AFFINITY)

    def nodes_with_required_anti_affinity(self) -> tuple[NodeInfo, ...]:
        """HavePodsWithRequiredAntiAffinityList."""
        return self._nodes_where(_WITH_REQUIRED_ANTI_AFFINITY)

    def has_pods_with_required_anti_affinity(self) -> bool:
        """Whether any node holds a pod with required pod anti-affinity."""
        return bool(self._rows_where(_WITH_REQUIRED_ANTI_AFFINITY))

    def _nodes_where(self, key: str) -> tuple[NodeInfo, ...]:
        found = self._rows_where(key)
        return tuple(found[i] for i in sorted(found))

    def _rows_where(self, key: str) -> Mapping[int, NodeInfo]:
        found: dict[int, NodeInfo] | None = self.pod_memo.get(key)
        if found is None:
            test = _NODE_TESTS[key]
            found = self.pod_memo[key] = {i: n for i, n in enumerate(self.nodes) if test(n)}
        return found


_WITH_AFFINITY = "with_affinity"
_WITH_REQUIRED_ANTI_AFFINITY = "with_required_anti_affinity"
# The pod memo's sets of nodes (by row), and which nodes each holds.
_NODE_TESTS: dict[str, Callable[[NodeInfo], bool]] = {
    _WITH_AFFINITY: lambda n: bool(n.pods_with_affinity),
    _WITH_REQUIRED_ANTI_AFFINITY: lambda n: any(p.required_anti_affinity for p in n.pods_with_affinity),
}


def _with_node_changed(memo: Mapping[Any, Any], i: int, node: NodeInfo) -> dict[Any, Any]:
    """The pod memo after node `i` became `node`: its sets of nodes updated, everything else dropped."""
    derived: dict[Any, Any] = {}
    for key, test in _NODE_TESTS.items():
        found = memo.get(key)
        if found is None:
            continue
        if test(node):
            found = {**found, i: node}
        elif i in found:
            found = {j: n for j, n in found.items() if j != i}
        derived[key] = found
    return derived
