"""NoDiskConflict (plugin VolumeRestrictions): a disk already mounted by a pod on the node, and
(kube-scheduler 1.29+) a ReadWriteOncePod claim already used by a pod anywhere.

GCE PD and ISCSI conflict unless both mounts are read-only; AWS EBS always conflicts; RBD
conflicts when the monitors overlap and pool and image are equal, unless both are read-only.

ReadWriteOncePod (GA in 1.29; 1.32's volume_restrictions.go): PreFilter looks up every claim the
pod names and counts its ReadWriteOncePod claims that some pod placed in the snapshot uses
(assumed and nominated pods included); while that count is positive every node fails, resolvably,
so preemption may evict the holder. A pod without such claims is judged by the disks alone, as in
1.20: a claim that does not exist is passed over here (1.32 refuses the pod in this plugin too),
since 1.20's NoDiskConflict never looked and CheckVolumeBinding reports it, with the same message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import BoolArray, NodeTable
from kubesched.plugins.framework import FITS, SKIP, Predicate

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

# The API server defaults an RBD volume's pool to "rbd"; default it too for hand-made objects.
_DEFAULT_RBD_POOL = "rbd"


@dataclass(frozen=True, slots=True)
class Disk:
    kind: str  # "gce", "aws", "iscsi" or "rbd"
    name: str  # pdName, volumeID, iqn, or pool/image for RBD
    read_only: bool
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: Disk) -> bool:
        if self.kind != other.kind or self.name != other.name:
            return False
        if self.kind == "aws":
            return True
        if self.kind == "rbd" and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


def _disk(volume: Mapping[str, Any]) -> Disk | None:
    if not isinstance(volume, Mapping):
        return None
    if src := volume.get("gcePersistentDisk"):
        return Disk("gce", str(src.get("pdName") or ""), bool(src.get("readOnly")))
    if src := volume.get("awsElasticBlockStore"):
        return Disk("aws", str(src.get("volumeID") or ""), bool(src.get("readOnly")))
    if src := volume.get("iscsi"):
        return Disk("iscsi", str(src.get("iqn") or ""), bool(src.get("readOnly")))
    if src := volume.get("rbd"):
        name = f"{src.get('pool') or _DEFAULT_RBD_POOL}/{src.get('image') or ''}"
        return Disk("rbd", name, bool(src.get("readOnly")), frozenset(src.get("monitors") or ()))
    return None


def pod_disks(pod: Pod) -> tuple[Disk, ...]:
    return tuple(d for d in map(_disk, pod.volumes) if d is not None)


def claim_names(pod: Pod) -> Iterator[str]:
    """The claimName of each of the pod's persistentVolumeClaim volumes, in order."""
    for volume in pod.volumes:
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if isinstance(source, Mapping):
            yield str(source.get("claimName") or "")


def read_write_once_pod_claims(pod: Pod, objects: ClusterObjects) -> frozenset[str]:
    """readWriteOncePodPVCsForPod: the pod's claims whose PVC has the ReadWriteOncePod access mode.
    A claim with no PVC is passed over, as 1.20's NoDiskConflict did (see the module's docstring)."""
    found: set[str] = set()
    for name in claim_names(pod):
        pvc = objects.persistent_volume_claims.get(f"{pod.namespace}/{name}")
        if pvc is None:
            continue
        modes = (pvc.get("spec") or {}).get("accessModes")
        if isinstance(modes, list) and READ_WRITE_ONCE_POD in modes:
            found.add(name)
    return frozenset(found)


def claim_uses(pods: Iterable[Pod], namespace: str, claims: frozenset[str]) -> Iterator[str]:
    """The claim named by each volume of `pods` that names one of `claims` of `namespace`
    (NodeInfo.PVCRefCounts, one per reference).

    1.32's AddPod and RemovePod match the claim name alone; a pod of another namespace using a
    claim of the same name is another claim's user, so it is not counted here.
    """
    for other in pods:
        if other.volumes and other.namespace == namespace:
            yield from (name for name in claim_names(other) if name in claims)


@dataclass(frozen=True, slots=True)
class VolumeRestrictionsState:
    """PreFilter's state: the pod's disks, its ReadWriteOncePod claims, and who uses those.

    `conflicting` is 1.32's conflictingPVCRefCount over the snapshot: how many of the claims some
    placed pod uses. `refs_by_node` counts, for each node holding a user, the volumes naming the
    claims. Filter takes a node's own count off and adds that of the node it is given: preemption
    hands it the node without its victims, which is 1.32's RemovePod (and AddPod for a reprieved
    pod), without counting the whole snapshot again.
    """

    disks: tuple[Disk, ...]
    namespace: str = ""
    claims: frozenset[str] = frozenset()
    conflicting: int = 0
    refs_by_node: Mapping[str, int] | None = None

    def conflicting_on(self, node: NodeInfo) -> int:
        """conflictingPVCRefCount with `node` as given in place of the snapshot's."""
        refs = self.refs_by_node or {}
        elsewhere = self.conflicting - refs.get(node.name, 0)
        if elsewhere > 0:
            return elsewhere
        return elsewhere + sum(1 for _ in claim_uses(node.pods.values(), self.namespace, self.claims))


def volume_restrictions_state(pod: Pod, snapshot: Snapshot) -> VolumeRestrictionsState | None:
    """PreFilter: None when the pod passes every node (1.32's Skip: no disk to check and no
    ReadWriteOncePod claim in use)."""
    disks = pod_disks(pod)
    claims = read_write_once_pod_claims(pod, snapshot.objects)
    if not claims:
        return VolumeRestrictionsState(disks) if disks else None
    used: set[str] = set()
    refs_by_node: dict[str, int] = {}
    for info in snapshot.nodes:
        named = list(claim_uses(info.pods.values(), pod.namespace, claims))
        if named:
            used.update(named)
            refs_by_node[info.name] = len(named)
    if not disks and not used:
        return None
    return VolumeRestrictionsState(disks, pod.namespace, claims, len(used), refs_by_node)


class NoDiskConflict(Predicate):
    name = "NoDiskConflict"
    # A new claim may make the pod's claims resolvable (1.32's PersistentVolumeClaim/Add).
    requeue_on = frozenset({"PersistentVolumeClaim"})
    # Not pod_dependent: the state is corrected for the node Filter is given (conflicting_on).

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if not pod.volumes:
            return SKIP
        state = volume_restrictions_state(pod, snapshot)
        return SKIP if state is None else state

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        if state.disks:
            for other in node.pods.values():
                if not other.volumes:
                    continue
                existing = pod_disks(other)
                if any(disk.conflicts(e) for disk in state.disks for e in existing):
                    return (ERR_REASON_DISK_CONFLICT,)
        if state.conflicting and state.conflicting_on(node) > 0:
            return (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,)
        return FITS

    def filter_nodes(self, pod: Pod, state: Any, table: NodeTable) -> BoolArray | None:
        # On the snapshot's own nodes the count is the snapshot's: a claim in use fails them all.
        if state.conflicting:
            return np.ones(table.count, dtype=np.bool_)
        return None
