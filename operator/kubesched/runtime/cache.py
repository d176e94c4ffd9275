"""The scheduler's view of the cluster: nodes, the pods on them, and pods assumed but not yet bound.

Mutated only on the event loop (watch handlers and the scheduling loop). Every change replaces
a node's immutable NodeInfo, so `snapshot()` is a cheap shallow copy that the executor can read
while events keep arriving.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from kubesched.model.disruption import DisruptionBudget, budget_from_dict
from kubesched.model.kinds import OBJECT_FIELDS
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Node, Pod
from kubesched.model.quota import EMPTY as EMPTY_QUOTAS
from kubesched.model.quota import (
    FINISHED,
    Amounts,
    ElasticQuota,
    QuotaState,
    add,
    effective,
    elastic_quota_from_dict,
    request,
)
from kubesched.model.quota import KIND as QUOTA_KIND
from kubesched.model.table import NodeColumns, NodeUsage


class SchedulerCache:
    def __init__(self) -> None:
        self._nodes: list[NodeInfo] = []
        self._index: dict[str, int] = {}  # replaced, never mutated, once a snapshot holds it
        self._index_shared = False  # whether a snapshot holds _index
        self._pods: dict[str, tuple[str, Pod]] = {}  # uid -> (node name, pod)
        self._orphans: dict[str, dict[str, Pod]] = {}  # pods on nodes the cache has not seen (yet)
        self._assumed: set[str] = set()
        self._objects: dict[str, dict[str, Mapping[str, Any]]] = {f: {} for f in OBJECT_FIELDS.values()}
        self._frozen_objects: ClusterObjects | None = None
        # The vectorised view of the nodes, kept across snapshots: the columns until a node
        # changes, the usage updated pod by pod (None: rebuild on the next snapshot).
        self._columns: NodeColumns | None = None
        self._usage: NodeUsage | None = None
        self._budgets: dict[str, DisruptionBudget] = {}  # PodDisruptionBudgets by ns/name, for preemption
        self._frozen_budgets: tuple[DisruptionBudget, ...] | None = None
        # What the placed pods of each namespace request (model/quota.py), kept pod by pod: building
        # it per batch (QuotaState.build) took 240 ms at 5,000 nodes and 30,000 pods in 5 quotas
        # here; kept so, a snapshot's QuotaState costs 0.03 ms, a pod event ~3 us more.
        # Each namespace's amounts are replaced, never changed in place: snapshots share them.
        self._used: dict[str, Amounts] = {}
        self._quotas: Mapping[str, ElasticQuota] | None = None  # in force by namespace; None: re-parse

    # --- nodes ---------------------------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        i = self._index.get(node.name)
        if i is not None:
            old = self._nodes[i].node
            if old == node:
                return  # a re-listing: nothing to redo
            if _column_fields(old) != _column_fields(node):
                self._columns = None  # a status heartbeat keeps them
            self._nodes[i] = self._nodes[i].with_node(node)
            return
        self._columns = self._usage = None
        info = NodeInfo(node)
        for pod in self._orphans.pop(node.name, {}).values():
            info = info.with_pod(pod)
        if self._index_shared:
            self._index, self._index_shared = dict(self._index), False
        # In place otherwise: a copy per node made a large cluster's start-up quadratic.
        self._index[node.name] = len(self._nodes)
        self._nodes.append(info)

    def remove_node(self, name: str) -> None:
        i = self._index.get(name)
        if i is None:
            return
        info = self._nodes.pop(i)
        self._columns = self._usage = None
        # Its pods stay accounted for: if the node comes back, they are still there.
        if info.pods:
            self._orphans[name] = dict(info.pods)
        self._index, self._index_shared = {n.name: j for j, n in enumerate(self._nodes)}, False

    def node_names(self) -> list[str]:
        return [n.name for n in self._nodes]

    # --- pods ----------------------------------------------------------------------------------

    def set_pod(self, pod: Pod) -> None:
        """A pod bound to a node was observed (added, changed, or our assumption confirmed)."""
        self._assumed.discard(pod.uid)
        self._place(pod, pod.node_name)

    def confirm(self, uid: str) -> None:
        """The watch shows an assumed pod bound where it was assumed: it is simply bound now."""
        self._assumed.discard(uid)

    def remove_pod(self, uid: str) -> None:
        self._assumed.discard(uid)
        self._unplace(uid)

    def assume(self, pod: Pod, node_name: str) -> None:
        """Account for `pod` on `node_name` before the bind lands, so the next cycle sees it."""
        self._assumed.add(pod.uid)
        self._place(replace(pod, node_name=node_name), node_name)

    def forget(self, uid: str) -> None:
        """Undo an assumption whose bind failed. A pod the watch already confirmed is left alone."""
        if uid in self._assumed:
            self._assumed.discard(uid)
            self._unplace(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def has_pod(self, uid: str) -> bool:
        return uid in self._pods

    def cached_pod(self, uid: str) -> Pod | None:
        entry = self._pods.get(uid)
        return entry[1] if entry else None

    def pod_node(self, uid: str) -> str | None:
        entry = self._pods.get(uid)
        return entry[0] if entry else None

    def pods(self) -> Iterable[Pod]:
        return (pod for _, pod in self._pods.values())

    # --- other objects -------------------------------------------------------------------------

    def set_object(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> None:
        """Record (or with None, drop) a Service, ReplicaSet, PV, ... for the plugins that read them."""
        store = self._objects[OBJECT_FIELDS[kind]]
        if obj is None:
            if store.pop(key, None) is None:
                return
        else:
            store[key] = obj
        self._frozen_objects = None
        if kind == QUOTA_KIND:
            self._quotas = None

    def get_object(self, kind: str, key: str) -> Mapping[str, Any] | None:
        return self._objects[OBJECT_FIELDS[kind]].get(key)

    def objects_of(self, kind: str) -> Mapping[str, Mapping[str, Any]]:
        """Every cached object of `kind`, by key (a read-only view)."""
        return dict(self._objects[OBJECT_FIELDS[kind]])

    def set_budget(self, key: str, obj: Mapping[str, Any] | None) -> None:
        """Record (or with None, drop) a PodDisruptionBudget of either API version."""
        if obj is None:
            self._budgets.pop(key, None)
        else:
            self._budgets[key] = budget_from_dict(obj)
        self._frozen_budgets = None

    def budgets(self) -> tuple[DisruptionBudget, ...]:
        if self._frozen_budgets is None:
            self._frozen_budgets = tuple(self._budgets.values())
        return self._frozen_budgets

    # --- snapshots -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        if self._frozen_objects is None:
            self._frozen_objects = ClusterObjects(**{f: dict(v) for f, v in self._objects.items()})
        if self._columns is None:
            self._columns = NodeColumns.build([n.node for n in self._nodes])
        if self._usage is None:
            self._usage = NodeUsage.build([n.pods for n in self._nodes])
        usage = self._usage.share() if self._usage is not None else False
        self._index_shared = True
        return Snapshot(
            tuple(self._nodes),
            self._frozen_objects,
            self._index,
            columns=self._columns or False,
            usage=usage,
            quotas=self.quotas(),
        )

    def quotas(self) -> QuotaState:
        """The ElasticQuotas in force and what their namespaces' placed pods use."""
        in_force = self._in_force()
        if not in_force:
            return EMPTY_QUOTAS
        return QuotaState(in_force, {ns: self._used[ns] for ns in in_force if ns in self._used})

    def has_quota(self, namespace: str) -> bool:
        """Whether an ElasticQuota is in force in `namespace`."""
        return namespace in self._in_force()

    def _in_force(self) -> Mapping[str, ElasticQuota]:
        if self._quotas is None:
            raw = self._objects[OBJECT_FIELDS[QUOTA_KIND]].values()
            self._quotas = effective(elastic_quota_from_dict(obj) for obj in raw)
        return self._quotas

    def elastic_quotas(self) -> list[ElasticQuota]:
        """Every cached ElasticQuota, parsed (those not in force included)."""
        return [elastic_quota_from_dict(obj) for obj in self._objects[OBJECT_FIELDS[QUOTA_KIND]].values()]

    def describe(self) -> dict[str, Any]:
        """What the cache holds, for /debug/cache: per node its requested resources and pod uids, and
        the keys of the other objects by kind."""
        return {
            "nodes": {
                n.name: {
                    "milli_cpu": n.requested.milli_cpu,
                    "memory": n.requested.memory,
                    "pods": sorted(n.pods),
                }
                for n in self._nodes
            },
            "orphans": {name: sorted(pods) for name, pods in self._orphans.items()},
            "assumed": sorted(self._assumed),
            "objects": {field: sorted(store) for field, store in self._objects.items()},
            "budgets": sorted(self._budgets),
        }

    def node_info(self, name: str) -> NodeInfo | None:
        i = self._index.get(name)
        return None if i is None else self._nodes[i]

    # --- internals -----------------------------------------------------------------------------

    def _place(self, pod: Pod, node_name: str) -> None:
        self._unplace(pod.uid)
        self._pods[pod.uid] = (node_name, pod)
        self._count(pod, 1)
        i = self._index.get(node_name)
        if i is None:
            self._orphans.setdefault(node_name, {})[pod.uid] = pod
        else:
            self._nodes[i] = self._nodes[i].with_pod(pod)
            if self._usage is not None and not self._usage.add(i, pod):
                self._usage = None

    def _unplace(self, uid: str) -> None:
        entry = self._pods.pop(uid, None)
        if entry is None:
            return
        node_name = entry[0]
        self._count(entry[1], -1)
        i = self._index.get(node_name)
        if i is not None:
            self._nodes[i] = self._nodes[i].without_pod(uid)
            if self._usage is not None and not self._usage.remove(i, entry[1]):
                self._usage = None
        else:
            orphans = self._orphans.get(node_name, {})
            orphans.pop(uid, None)
            if not orphans:
                self._orphans.pop(node_name, None)

    def _count(self, pod: Pod, sign: int) -> None:
        if pod.phase in FINISHED:
            return
        used = add(self._used.get(pod.namespace, {}), request(pod), sign)
        if used:
            self._used[pod.namespace] = used
        else:
            self._used.pop(pod.namespace, None)


def _column_fields(node: Node) -> tuple[Any, ...]:
    """What NodeColumns reads of a node."""
    return (
        node.labels,
        node.allocatable,
        node.unschedulable,
        node.taints,
        node.parse_error,
        node.annotations,
        node.images,
    )
