"""NoDiskConflict (plugin VolumeRestrictions): a disk already mounted by a pod on the node.

GCE PD and ISCSI conflict unless both mounts are read-only; AWS EBS always conflicts; RBD
conflicts when the monitors overlap and pool and image are equal, unless both are read-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.framework import FITS, SKIP, Predicate

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"

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


class NoDiskConflict(Predicate):
    name = "NoDiskConflict"

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        return pod_disks(pod) or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        for other in node.pods.values():
            if not other.volumes:
                continue
            existing = pod_disks(other)
            if any(disk.conflicts(e) for disk in state for e in existing):
                return (ERR_REASON_DISK_CONFLICT,)
        return FITS
