"""The kinds of object the scheduler lists and watches: one table.

Each kind has a watch of its own (kube/informer.py, one per kind: app/startup.py), nodes and pods
as the others. The kinds below are read by some plugins: `kubesched snapshot save` lists them too,
and the cache keeps each in one field of `ClusterObjects`, except PodDisruptionBudgets, which it
keeps parsed for preemption. Adding a kind is one row here and one field there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL

# kube-scheduler's field selector for pods: the cache needs every running pod to account for node usage.
NON_TERMINAL_PODS: Final = "status.phase!=Succeeded,status.phase!=Failed"
# Succeeded or Failed: a field selector's terms are ANDed, so this is the only way to say "or".
TERMINAL_PODS: Final = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"
BUDGET_KIND: Final = "PodDisruptionBudget"


@dataclass(frozen=True, slots=True)
class WatchedKind:
    """One API resource the scheduler lists and watches, across all namespaces."""

    kind: str
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool
    field: str | None = None  # the ClusterObjects field it fills; None: kept otherwise
    field_selector: str = ""  # server-side filters of its listings and watches
    label_selector: str = ""

    @property
    def api_version(self) -> str:
        """`group/version`, or `version` for the core API."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The collection's path."""
        return (
            f"/apis/{self.group}/{self.version}/{self.plural}"
            if self.group
            else f"/api/{self.version}/{self.plural}"
        )

    @property
    def query(self) -> dict[str, str]:
        """The query parameters of its listings and watches."""
        query = {"fieldSelector": self.field_selector, "labelSelector": self.label_selector}
        return {name: value for name, value in query.items() if value}


NODES: Final = WatchedKind("Node", "", "v1", "nodes", namespaced=False)
PODS: Final = WatchedKind("Pod", "", "v1", "pods", namespaced=True, field_selector=NON_TERMINAL_PODS)
# PodGroup members that finished, by the label naming their group (model/podgroup.group_label).
# The pod watch loses a member when it finishes: its DELETED carries the state before. These
# watches give its final phase, and its deletion later, at a cost bounded by the members. Label
# selectors cannot say "or" either: a pod with both labels belongs to the first watch only.
FINISHED_MEMBERS: Final[Mapping[str, WatchedKind]] = {
    label: WatchedKind("Pod", "", "v1", "pods", True, field_selector=TERMINAL_PODS, label_selector=selector)
    for label, selector in (
        (POD_GROUP_LABEL, POD_GROUP_LABEL),
        (LEGACY_POD_GROUP_LABEL, f"{LEGACY_POD_GROUP_LABEL},!{POD_GROUP_LABEL}"),
    )
}

# The objects some plugins read, in the order the start-up sync lists them.
WATCHED_OBJECTS: Final[tuple[WatchedKind, ...]] = (
    # kind, group, version, plural, namespaced, ClusterObjects field
    WatchedKind("Service", "", "v1", "services", True, "services"),
    WatchedKind("ReplicationController", "", "v1", "replicationcontrollers", True, "replication_controllers"),
    WatchedKind("ReplicaSet", "apps", "v1", "replicasets", True, "replica_sets"),
    WatchedKind("StatefulSet", "apps", "v1", "statefulsets", True, "stateful_sets"),
    WatchedKind("PersistentVolume", "", "v1", "persistentvolumes", False, "persistent_volumes"),
    WatchedKind(
        "PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, "persistent_volume_claims"
    ),
    WatchedKind("StorageClass", "storage.k8s.io", "v1", "storageclasses", False, "storage_classes"),
    WatchedKind("CSINode", "storage.k8s.io", "v1", "csinodes", False, "csi_nodes"),
    # Storage capacity tracking (plugins/volume_binding). CSIStorageCapacity is v1beta1 in 1.21-1.23,
    # v1 from 1.24 (v1beta1 too until 1.26: one object seen through both is one entry) and absent
    # from 1.20, whose storage.k8s.io/v1 serves CSIDriver: served_kinds looks for each resource.
    WatchedKind("CSIDriver", "storage.k8s.io", "v1", "csidrivers", False, "csi_drivers"),
    WatchedKind(
        "CSIStorageCapacity", "storage.k8s.io", "v1", "csistoragecapacities", True, "csi_storage_capacities"
    ),
    WatchedKind(
        "CSIStorageCapacity",
        "storage.k8s.io",
        "v1beta1",
        "csistoragecapacities",
        True,
        "csi_storage_capacities",
    ),
    # Pod (anti-)affinity's namespaceSelector picks namespaces by their labels.
    WatchedKind("Namespace", "", "v1", "namespaces", False, "namespaces"),
    # Gangs (model/podgroup.py): scheduler-plugins' coscheduling API, from its CRD or kubesched's.
    WatchedKind("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True, "pod_groups"),
    # Capacity scheduling (model/quota.py): scheduler-plugins' ElasticQuota, from its CRD or kubesched's.
    WatchedKind("ElasticQuota", "scheduling.x-k8s.io", "v1alpha1", "elasticquotas", True, "elastic_quotas"),
    # For preemption. Kubernetes 1.20 serves only v1beta1, 1.25+ only v1, 1.21-1.24 both: only
    # the first version the server serves is watched (app/discovery.py, app/startup.py).
    WatchedKind(BUDGET_KIND, "policy", "v1", "poddisruptionbudgets", True),
    WatchedKind(BUDGET_KIND, "policy", "v1beta1", "poddisruptionbudgets", True),
)

POD_GROUPS: Final = next(watched for watched in WATCHED_OBJECTS if watched.kind == "PodGroup")
ELASTIC_QUOTAS: Final = next(watched for watched in WATCHED_OBJECTS if watched.kind == "ElasticQuota")

# The kinds of WATCHED_OBJECTS (a kind served in two versions is one kind).
OBJECT_KIND_NAMES: Final = frozenset(watched.kind for watched in WATCHED_OBJECTS)
# ClusterObjects field by the kind that fills it.
OBJECT_FIELDS: Final[Mapping[str, str]] = {
    watched.kind: watched.field for watched in WATCHED_OBJECTS if watched.field is not None
}
